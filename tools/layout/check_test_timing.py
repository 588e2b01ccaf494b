#!/usr/bin/env python3
"""Checks that no test under tests/ rests on time: a sleep (time.sleep, sleep_for, usleep,
nanosleep, a shell's sleep) or an assertion comparing a wall time (wall_ms, an elapsed time, a
clock's reading, a duration literal) passes only where a comment on that same line says why,
after "why:". Line by line: a comparison split over lines is not seen.

Tests order events by a synchronization they own (an event, a barrier, a file the other side
waits for) and assert what decided a verdict (the note, the status), never a time a loaded box
can reach. What stays is said so on its line: the poll interval of a wait with a deadline, a
case's own work or hang, a window in which a wrong outcome would show, a lower bound no box can
undercut. Prints each line without one as FILE:LINE: text and exits 1; exits 0 when none.

    tools/layout/check_test_timing.py [SOURCE_ROOT]

Run by ctest (layout_tests_rest_on_no_time); tests/python/test_layout.py tests it.
"""
import pathlib
import re
import sys

SUFFIXES = {".cpp", ".h", ".cu", ".py", ".sh"}
# time.sleep, sleep_for, sleep_until, usleep, nanosleep, clock_nanosleep, a bare sleep( (from time
# import sleep; ::sleep), asyncio.sleep, and a shell's `sleep 5` (also inside a command string).
SLEEP = re.compile(r"\btime\.sleep\b|\bsleep(_for|_until)?\s*\(|\busleep\s*\(|nanosleep\s*\(|"
                   r"\basyncio\.sleep\b|\bsleep\s+[0-9.]")
# An assertion with an order comparison: GoogleTest's, gmock's matchers, unittest's, Python's.
# (`<` or `>`, not `<<` or `>>`: a stream.)
ORDER = r"(?<![<>])[<>](?![<>])"
COMPARE = re.compile(r"\b(EXPECT|ASSERT)_(LT|LE|GT|GE)\s*\(|\b(EXPECT|ASSERT)_(TRUE|FALSE)\s*\(.*"
                     + ORDER + r"|\b(Lt|Le|Gt|Ge)\s*\(|\bassert(Less|Greater)(Equal)?\s*\(|"
                     r"^\s*assert\b.*" + ORDER)
# ... of something that is a wall time: a clock, a measured time, a duration literal (50ms, 5s).
WALL_TIME = re.compile(r"wall_ms|elapsed|steady_clock|system_clock|\bmonotonic\s*\(|"
                       r"perf_counter|time\.time\s*\(|\bseconds\b|startup_ms|body_ms|"
                       r"\b[0-9]+(\.[0-9]+)?(ns|us|ms|s|min|h)\b|\.count\(\)")
WHY = re.compile(r"(//|#).*\bwhy:\s*\S")


def problems(root):
    """(path relative to root, line number, line) for each line resting on time with no why."""
    found = []
    for path in sorted((root / "tests").rglob("*")):
        if path.suffix not in SUFFIXES or not path.is_file():
            continue
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            timed = SLEEP.search(line) or (COMPARE.search(line) and WALL_TIME.search(line))
            if timed and not WHY.search(line):
                found.append((path.relative_to(root), number, line.strip()))
    return found


def main(argv):
    root = pathlib.Path(argv[1] if len(argv) > 1 else pathlib.Path(__file__).parents[2])
    found = problems(root.resolve())
    for path, number, line in found:
        print(f"{path}:{number}: {line}")
    if found:
        print(f"{len(found)} line(s) rest on time: order by a synchronization the test owns and "
              "assert what decided the outcome, or say on the line why the time is needed "
              "(a comment with 'why: ...')", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
