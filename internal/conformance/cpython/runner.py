# Runs CPython test modules inside the guest (the sandbox's or wasmtime's
# WASI) and prints each test's outcome as one JSON line after MARK, as the
# Go test reads it. Not regrtest: it needs subprocesses for its workers,
# and its summary does not name each test's outcome. The configuration
# is the first line of this file, put there by the Go test:
#   CONFIG = {"module": "test.test_os", "tests": [...names, or empty...], "cwd": ...,
#             "threads": "yes" where the guest can start threads}
import io, json, os, sys, time, traceback, unittest

MARK = "@@cpython-result@@ "


class Collect(unittest.TestResult):
    """unittest's counts, plus every test's outcome by its id."""

    def __init__(self):
        super().__init__()
        self.outcomes = {}
        self.details = {}

    def _set(self, test, outcome, err=None):
        tid = test.id()
        # A test's subtests can fail more than once: keep the worst.
        rank = {"pass": 0, "skip": 1, "xfail": 1, "xpass": 2, "fail": 3, "error": 4}
        if rank[outcome] >= rank.get(self.outcomes.get(tid), -1):
            self.outcomes[tid] = outcome
        if err is not None:
            text = err if isinstance(err, str) else self._exc_info_to_string(err, test)
            # The last lines say why; whole tracebacks would swamp the output.
            self.details[tid] = "\n".join(text.rstrip().splitlines()[-6:])

    def startTest(self, test):
        super().startTest(test)
        sys.__stderr__.write(f"{test.id()} ... ")
        sys.__stderr__.flush()

    def stopTest(self, test):
        super().stopTest(test)
        sys.__stderr__.write(f"{self.outcomes.get(test.id(), 'pass')}\n")

    def addSuccess(self, test):
        super().addSuccess(test)
        self._set(test, "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set(test, "fail", err)

    def addError(self, test, err):
        super().addError(test, err)
        self._set(test, "error", err)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._set(test, "skip", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._set(test, "xfail")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._set(test, "xpass")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is None:
            return
        # Counted as unittest counts them (one failure per subtest), and
        # reported under the test that holds them.
        kind = "fail" if issubclass(err[0], test.failureException) else "error"
        self._set(test, kind, err)


def main():
    cfg = CONFIG
    if cfg.get("cwd"):
        os.chdir(cfg["cwd"])
    from test import support
    # As regrtest: tests compare against these to find leaks to the console.
    support.record_original_stdout(sys.stdout)
    if cfg.get("threads") == "yes":
        # CPython's test support takes it that WASI starts no threads and
        # skips every test that would; the sandbox on wazero starts them.
        from test.support import threading_helper
        threading_helper.can_start_thread = True
    loader = unittest.TestLoader()
    names = cfg.get("tests") or [cfg["module"]]
    start = time.perf_counter()
    suite = loader.loadTestsFromNames(names)
    result = Collect()
    suite.run(result)
    out = {
        "module": cfg["module"],
        "run": result.testsRun,
        "failures": len(result.failures),
        "errors": len(result.errors),
        "skipped": len(result.skipped),
        "seconds": round(time.perf_counter() - start, 1),
        "outcomes": result.outcomes,
        "details": result.details,
    }
    sys.__stdout__.write("\n" + MARK + json.dumps(out, sort_keys=True) + "\n")
    sys.__stdout__.flush()


main()
