#!/usr/bin/env python3
"""Runs the official WebAssembly wasi-testsuite's preview1 tests through
`airlock wasm`, as the suite's own runner would (doc/specification.md):
each X.wasm with its X.json (args, env, a "root" directory preopened as /,
the expected exit code and stdout). CI cannot fetch the suite; this is for
a local checkout of its prebuilt tests (the prod/testsuite-base branch):

    scripts/wasi-testsuite.py SUITE_DIR [--airlock BIN] [-v]

SUITE_DIR holds tests/{c,rust,assemblyscript}/testsuite/wasm32-wasip1/.
Prints a line per failing test and the pass count per suite; exits 1 when
any test fails.
"""
import argparse
import json
import pathlib
import subprocess
import sys


def run_test(airlock, wasm, verbose):
    spec = {}
    spec_file = wasm.with_suffix(".json")
    if spec_file.exists():
        spec = json.loads(spec_file.read_text())
    cmd = [airlock, "wasm"]
    for k, v in spec.get("env", {}).items():
        cmd += ["--env", f"{k}={v}"]
    if spec.get("root"):
        cmd += ["--dir", f"{wasm.parent / spec['root']}:/"]
    cmd += [str(wasm)] + spec.get("args", [])
    p = subprocess.run(cmd, capture_output=True, timeout=120)
    problems = []
    want_code = spec.get("exit_code", 0)
    if p.returncode != want_code:
        problems.append(f"exit {p.returncode}, want {want_code}")
    if "stdout" in spec and p.stdout.decode(errors="replace") != spec["stdout"]:
        problems.append(f"stdout {p.stdout[:200]!r}, want {spec['stdout'][:200]!r}")
    if problems and verbose:
        problems.append("stderr: " + p.stderr.decode(errors="replace")[-2000:])
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("suite")
    ap.add_argument("--airlock", default="airlock")
    ap.add_argument("-v", action="store_true", help="print failing tests' stderr")
    a = ap.parse_args()
    total_pass = total = 0
    for lang in ("c", "rust", "assemblyscript"):
        d = pathlib.Path(a.suite) / "tests" / lang / "testsuite" / "wasm32-wasip1"
        if not d.is_dir():
            continue
        tests = sorted(d.glob("*.wasm"))
        passed = 0
        for wasm in tests:
            problems = run_test(a.airlock, wasm, a.v)
            if problems:
                print(f"FAIL {lang}/{wasm.stem}: " + "; ".join(problems))
            else:
                passed += 1
        print(f"{lang}: {passed}/{len(tests)}")
        total_pass, total = total_pass + passed, total + len(tests)
    print(f"total: {total_pass}/{total}")
    return 0 if total_pass == total else 1


if __name__ == "__main__":
    sys.exit(main())
