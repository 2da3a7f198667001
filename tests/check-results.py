#!/usr/bin/env python3
"""check-results.py CONTEXT REPORT... - fail a run whose tests were skipped or never ran.

A wrapper that runs a whole test binary or suite sees only its exit status, and every runner
this project uses exits 0 when tests were skipped, and GoogleTest 1.12 even when a filter
matched no test. This reads the runner's own report instead and fails (status 1) when
  - a report is missing or unreadable,
  - no test ran (every one of them skipped, or none matched), or
  - a test was skipped that tests/skip-allowlist.txt does not allow in CONTEXT.
Reports: GoogleTest's --gtest_output=json:FILE (*.json), and JUnit XML (*.xml) as written by
ctest --output-junit, pytest --junitxml, node --test-reporter=junit and bun test
--reporter=junit. A test's name is "Suite.Test" in GoogleTest, and its enclosing suites and
its own name joined by " > " in JUnit ("pty-compat.test.mjs > @lydell/node-pty > ...").
The allow-list's lines are "CONTEXT | NAME GLOB | WHY" (fnmatch); a line starting with '#' is a
comment.
PTYVISOR_SKIP_ALLOWLIST names another allow-list.
"""

import fnmatch
import json
import os
import sys
import xml.etree.ElementTree as ElementTree

HERE = os.path.dirname(os.path.abspath(__file__))


def read_allowlist(path, context):
    allowed = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            fields = [field.strip() for field in line.split("|")]
            if len(fields) != 3 or not all(fields):
                sys.exit(f"check-results: {path}:{number}: not 'CONTEXT | NAME GLOB | WHY'")
            if fields[0] == context:
                allowed.append(fields[1])
    return allowed


def gtest_results(path):
    """(name, skipped) for each test GoogleTest ran; filtered-out tests are not reported."""
    with open(path, encoding="utf-8") as f:
        report = json.load(f)
    for suite in report.get("testsuites", []):
        for test in suite.get("testsuite", []):
            if test.get("status") != "RUN":
                continue  # DISABLED_ tests: not run, and not asked for
            yield f"{suite['name']}.{test['name']}", test.get("result") == "SKIPPED"


def junit_results(path):
    def walk(element, suites):
        for child in element:
            if child.tag == "testsuite":
                yield from walk(child, suites + [child.get("name", "")])
            elif child.tag == "testcase":
                name = " > ".join([s for s in suites if s] + [child.get("name", "")])
                # ctest writes status="notrun" (with <skipped>) for "Not Run" and skipped tests.
                skipped = child.find("skipped") is not None or child.get("status") in ("notrun", "disabled")
                yield name, skipped

    root = ElementTree.parse(path).getroot()
    if root.tag == "testsuite":
        yield from walk(root, [root.get("name", "")])
    else:
        yield from walk(root, [])


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: check-results.py CONTEXT REPORT...")
    context, reports = argv[1], argv[2:]
    allowlist = os.environ.get("PTYVISOR_SKIP_ALLOWLIST", os.path.join(HERE, "skip-allowlist.txt"))
    allowed = read_allowlist(allowlist, context)
    ran, allowed_skips, bad = 0, 0, []
    for path in reports:
        try:
            results = list(gtest_results(path) if path.endswith(".json") else junit_results(path))
        except (OSError, ValueError, ElementTree.ParseError) as e:
            bad.append(f"no report from the run: {path}: {e}")
            continue
        for name, skipped in results:
            if not skipped:
                ran += 1
            elif any(fnmatch.fnmatchcase(name, glob) for glob in allowed):
                allowed_skips += 1
            else:
                bad.append(f"skipped, and not allowed in '{context}' by {allowlist}: {name}")
    if ran == 0:
        bad.append("no test ran (a filter that matches nothing, or every test skipped)")
    print(f"[check-results] {context}: {ran} ran, {allowed_skips} skipped as allowed, {len(bad)} problems")
    for problem in bad:
        print(f"[check-results] {context}: {problem}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
