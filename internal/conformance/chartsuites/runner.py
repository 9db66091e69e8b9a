# Runs matplotlib's or Pillow's own pytest suite, in the sandbox or on
# native CPython (scripts/charts-tests.sh runs it both ways, the Go test
# in the sandbox), and prints the counts and every test that did not pass
# as one JSON line after MARK. The configuration is the first line of
# this file, put there by whoever runs it:
#   CONFIG = {"suite": "matplotlib" | "pillow", "tree": TREE,
#             "files": [test files under the suite's folder],
#             "deselect": {node id: why}}
# TREE holds the sdists' tests as TREE/matplotlib/tests and TREE/Tests.
import json, os, sys, tempfile, time

MARK = "@@charts-result@@ "


class Tally:
    """pytest's outcomes by node id: passed, failed, error, skipped,
    xfailed, xpassed (a test's set-up or teardown error counts once)."""

    def __init__(self):
        self.outcomes = {}
        self.details = {}

    def pytest_runtest_logreport(self, report):
        nid = report.nodeid
        if report.when == "call":
            if hasattr(report, "wasxfail"):
                outcome = "xpassed" if report.passed else "xfailed"
            else:
                outcome = report.outcome
        elif report.failed:
            outcome = "error"
        elif report.skipped:
            outcome = "xfailed" if hasattr(report, "wasxfail") else "skipped"
        else:
            return
        if self.outcomes.get(nid) in ("failed", "error"):
            return
        self.outcomes[nid] = outcome
        if outcome in ("failed", "error", "skipped"):
            text = report.longreprtext if outcome != "skipped" else str(report.longrepr[-1] if isinstance(report.longrepr, tuple) else report.longrepr)
            # The last lines say why; whole tracebacks would swamp the output.
            self.details[nid] = "\n".join(text.rstrip().splitlines()[-4:])

    def pytest_collectreport(self, report):
        if report.failed:
            self.outcomes[report.nodeid] = "error"
            self.details[report.nodeid] = "\n".join(report.longreprtext.rstrip().splitlines()[-4:])


def main():
    cfg = CONFIG
    import pytest
    import _pytest.tmpdir
    if not hasattr(os, "getuid"):
        # pytest's tmp_path asks os.getuid for the owner check of its
        # base directory (None on Windows and Emscripten only); WASI has
        # no user ids, so every test using tmp_path would be a set-up
        # error that says nothing about matplotlib or Pillow.
        _pytest.tmpdir.get_user_id = lambda: None
    tree = cfg["tree"]
    if not tree:
        # In the sandbox the tree is a package layer: find it on sys.path.
        tree = next(p for p in sys.path if os.path.isfile(os.path.join(p, "Tests", "conftest.py")))
    elif tree not in sys.path:
        sys.path.insert(0, tree)
    if cfg["suite"] == "matplotlib":
        import matplotlib
        # The build's and the wheel's matplotlib have no baseline images:
        # the sdist's tests are found beside it, as matplotlib.tests.
        matplotlib.__path__.append(os.path.join(tree, "matplotlib"))
        base = os.path.join(tree, "matplotlib", "tests")
        # Image comparisons write result_images/ in the working directory.
        os.chdir(tempfile.mkdtemp(prefix="mpl-"))
        root = os.path.join(tree, "matplotlib")
    else:
        base = os.path.join(tree, "Tests")
        # Pillow's tests open their images as Tests/images/..., relative
        # to the sdist's root, and write only under tmp_path.
        os.chdir(tree)
        root = tree
    args = ["-q", "-p", "no:cacheprovider", "-p", "no:faulthandler", "-p", "no:logging",
            "-s", "--rootdir", root, "-o", "addopts=", "--import-mode=importlib",
            "--continue-on-collection-errors", "--tb=short"]
    for nid in cfg.get("deselect", {}):
        # A whole file or folder is not collected at all (its imports
        # may be what fails); a test is collected and left out.
        if "::" in nid:
            args += ["--deselect", nid]
        else:
            args += ["--ignore", os.path.join(root, nid)]
    args += [os.path.join(base, f) for f in cfg["files"]]
    tally = Tally()
    start = time.time()
    pytest.main(args, plugins=[tally])
    counts = {}
    for o in tally.outcomes.values():
        counts[o] = counts.get(o, 0) + 1
    def rel(nid):
        # Node ids are relative to the root (tests/test_x.py::t,
        # Tests/test_x.py::t) but for collection errors' absolute paths.
        i = nid.find("tests/" if cfg["suite"] == "matplotlib" else "Tests/")
        return nid[i:] if i >= 0 else nid
    notpass = {rel(k): v for k, v in tally.outcomes.items() if v not in ("passed", "skipped", "xfailed")}
    skipped = {rel(k): tally.details.get(k, "") for k, v in tally.outcomes.items() if v == "skipped"}
    out = {"suite": cfg["suite"], "counts": counts, "seconds": round(time.time() - start, 1),
           "outcomes": notpass, "details": {rel(k): v for k, v in tally.details.items() if rel(k) in notpass},
           "skipped": skipped, "passed": sorted(rel(k) for k, v in tally.outcomes.items() if v == "passed")}
    sys.stdout.flush()
    sys.stdout.write("\n" + MARK + json.dumps(out) + "\n")
    sys.stdout.flush()


main()
