"""Each command's option table is the one source of its parsing and its
--help (tools/common/args.h), and the docs agree with it.

* Every line of a command's --help fits 80 columns.
* Every option its --help lists is accepted by its parser: one call gives
  them all, each with a valid value, then --help, which the parser reaches
  (exit 0, nothing on stderr) only when everything before it was taken.
* The parser accepts no option its --help omits: every "--name" the
  command's own source file or the shared groups spell, and a made-up one,
  is refused with one line naming it (a flag or value option parsed by
  hand beside the table would be taken, or would ask for its value).
* Every option the --help's synopsis shows is in its list, and so is every
  option docs/*.md and README.md show with `hamer CMD` in a code block.

Every command parses through its table (TABLED; NOT_YET is for a command
that does not yet): a new command must be put in one of the two lists.
`hamer bench --folder` is a mode with its own few options, parsed in
tools/cli/cli_bench_folder.c, which passes the detector's on to `hamer
batch` and `hamer run` as given.
"""

import os
import re

import pytest

from conftest import REPO, describe, run_hamer

TABLED = ["run", "batch", "detect", "video", "live", "regress", "crop", "convert", "worker", "submit", "results", "serve",
          "bench"]
NOT_YET = []

# A value each option takes (the rest take "1": a count, a number in range,
# a file name, which the parser does not open).
VALUES = {"--box": "1,2,30,40", "--precision": "fast", "--crop-mode": "pad", "--body": "on", "--body-boxes": "off",
          "--proposals": "off", "--smooth": "none", "--shape": "first", "--draw": "mesh,boxes", "--min-score": "0.5",
          "--track-presence": "0.5", "--from": "$", "--consumer": "c1", "--claim-idle-ms": "60000", "--id": "job-1", "--fov": "60",
          "--option": "video_size=64x48", "--pace": "off"}
# Taken before any command's parser sees them (tools/hamer_main.c).
GLOBAL = {"--help", "--version", "--no-cache"}

# Options that switch to another mode with options of its own (left out
# of the all-at-once call).
MODES = {"bench": {"--folder"}}

# Without it, worker, submit and results need --redis (a usage error too).
NO_REDIS = {k: v for k, v in os.environ.items() if k != "HAMER_REDIS_URL"}

OPTION_LINE = re.compile(r"^  (--[a-z0-9][a-z0-9-]*)(?: (\S+))?(?:  |$)")


def help_text(cmd):
    proc = run_hamer([cmd, "--help"])
    assert proc.returncode == 0 and not proc.stderr, describe(proc)
    return proc.stdout


def listed(text):
    """The options of a --help's lists: {name: meta or None (a flag)}."""
    out = {}
    for line in text.splitlines():
        m = OPTION_LINE.match(line)
        if m:
            assert m.group(1) not in out, f"{m.group(1)} listed twice"
            out[m.group(1)] = m.group(2)
    return out


def synopsis(text):
    """The options the usage lines at the top show."""
    head = text.split("\n\n", 1)[0]
    return set(re.findall(r"(--[a-z0-9][a-z0-9-]*)", head))


def source_files(cmd):
    """The file that defines the command's entry (tools/hamer_main.c's
    table), and for video its header; and the shared groups' file."""
    main = (REPO / "tools" / "hamer_main.c").read_text()
    fn = re.search(r'\{"%s", (\w+)\}' % re.escape(cmd), main).group(1)
    files = [p for p in sorted((REPO / "tools").rglob("*.c")) if re.search(r"^int %s\(" % fn, p.read_text(), re.M)]
    assert len(files) == 1, (cmd, fn, files)
    return files + sorted(files[0].parent.glob(files[0].stem + ".h")) + [REPO / "tools/common/args_groups.c"]


def test_every_command_is_in_a_list():
    text = run_hamer(["--help"]).stdout
    commands = re.findall(r"^  ([a-z]+)  ", text.split("commands:", 1)[1].split("\n\n", 1)[0], re.M)
    assert sorted(commands) == sorted(TABLED + NOT_YET)


@pytest.mark.parametrize("cmd", TABLED)
def test_help_fits_80_columns(cmd):
    wide = [line for line in help_text(cmd).splitlines() if len(line) > 80]
    assert not wide, f"hamer {cmd} --help: lines over 80 columns:\n" + "\n".join(wide)


@pytest.mark.parametrize("cmd", TABLED)
def test_every_listed_option_is_accepted(cmd):
    opts = listed(help_text(cmd))
    assert len(opts) >= 3, opts
    args = []
    for name, meta in opts.items():
        if name in MODES.get(cmd, ()):
            continue
        args.append(name)
        if meta is not None:
            args.append(VALUES.get(name, "1"))
    proc = run_hamer([cmd, *args, "--help"])
    assert proc.returncode == 0 and not proc.stderr and proc.stdout == help_text(cmd), \
        f"hamer {cmd} {' '.join(args)} --help: {describe(proc)}"


@pytest.mark.parametrize("cmd", TABLED)
def test_no_option_outside_the_help(cmd):
    opts = listed(help_text(cmd))
    spelled = set()
    for path in source_files(cmd):
        spelled |= set(re.findall(r'"(--[a-z0-9][a-z0-9-]*)', path.read_text()))
    for name in sorted(spelled - set(opts) - GLOBAL) + ["--frobnicate"]:
        proc = run_hamer([cmd, name], env=NO_REDIS)
        lines = proc.stderr.splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and name in lines[0] and "needs a value" not in lines[0], \
            f"hamer {cmd} {name}: its --help does not list it, yet: {describe(proc)}"


@pytest.mark.parametrize("cmd", TABLED)
def test_synopsis_shows_listed_options(cmd):
    text = help_text(cmd)
    missing = synopsis(text) - set(listed(text))
    assert not missing, f"hamer {cmd} --help: the synopsis shows {sorted(missing)}, the list does not"


def doc_mentions():
    """(file:line, command, option) for every option after `hamer CMD` in
    the docs' code blocks and inline code (a block's command runs on over
    lines ending in a backslash)."""
    out = []
    for path in [REPO / "README.md"] + sorted((REPO / "docs").glob("*.md")):
        lines = path.read_text().splitlines()
        fence, cmd = False, None
        for i, line in enumerate(lines, 1):
            if re.match(r"^\s*(```|~~~)", line):
                fence, cmd = not fence, None
                continue
            where = f"{path.relative_to(REPO)}:{i}"
            if fence:
                m = re.search(r"\bhamer ([a-z]+)\b(.*)", line)
                if m:
                    cmd, rest = m.group(1), m.group(2)
                elif cmd:
                    rest = line
                else:
                    continue
                rest = rest.split("#", 1)[0]
                out += [(where, cmd, o) for o in re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", rest)]
                if not line.rstrip().endswith("\\"):
                    cmd = None
            else:
                for span in re.findall(r"`([^`]*)`", line):
                    m = re.match(r"(?:\S*/)?hamer ([a-z]+)\b(.*)", span)
                    if m:
                        out += [(where, m.group(1), o) for o in re.findall(r"(?<![\w-])(--[a-z0-9][a-z0-9-]*)", m.group(2))]
    return out


def test_docs_show_only_options_the_commands_take():
    mentions = doc_mentions()
    assert len(mentions) > 50, "the docs' examples were not found"
    known = {cmd: set(listed(help_text(cmd))) | GLOBAL for cmd in TABLED}
    bad = [f"{where}: hamer {cmd} {opt}" for where, cmd, opt in mentions if cmd in known and opt not in known[cmd]]
    assert not bad, "the docs show options the commands do not take:\n" + "\n".join(bad)
