"""Reading shell command lines the way the integrity checks need: which files a
command writes and how (by hand, by copying, or by running a program), which
programs it runs, which paths and URLs it names, and which literal text it
carries (``echo`` arguments, here-documents, ``python -c`` code).

This is a tolerant reader, not a shell: quoting, pipelines, ``;``/``&&``/``||``,
redirections (``>``, ``>>``, ``2>``, ``&>``, ``tee``), here-documents (``<<EOF``,
``<<-'EOF'``), ``sed -i``, ``cp``/``mv``/``curl -o`` and wrappers such as
``nohup``, ``timeout 60``, ``env X=1`` or ``sudo`` are understood; anything it
cannot parse falls back to splitting on blanks.  The command line comes from the
trajectory (what the agent sent), never from the agent's programs.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Iterable

from attrs import define, field

_PUNCT = ";&|<>()\n"
_SEPARATORS = {";", "&&", "||", "|", "&", "\n", "(", ")", ";;", "|&"}
_REDIRECTS = {">", ">>", ">|", "&>", "&>>", ">&", "<", "<<", "<<-", "<<<", "<>"}
_HEREDOC_START = re.compile(r"<<(-?)[ \t]*(?:'([^'\n]*)'|\"([^\"\n]*)\"|\\?([A-Za-z0-9_.\-]+))")
_URL = re.compile(r"""(?:(?:https?|ftp|git|ssh|s3|gs|hf)://|git@)[^\s'"<>|;`)\]}]+""", re.IGNORECASE)
_BARE_URL = re.compile(r"""(?<![\w@/.:-])(?:www\.)?(?:[a-z0-9-]+\.)+(?:org|com|net|io|ai|edu|dev|co|info|me|gov)"""
                       r"""(?:/[^\s'"<>|;`)\]}]*)?""", re.IGNORECASE)
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")

#: Commands that run their arguments (their own options are skipped to find the command).
WRAPPERS = {"nohup", "time", "timeout", "nice", "ionice", "env", "sudo", "stdbuf", "setsid",
            "exec", "command", "builtin", "xargs", "srun", "taskset", "chrt", "caffeinate", "unbuffer"}
#: Commands whose output is the literal text they were given.
LITERAL_WRITERS = {"echo", "printf", "yes"}
#: Commands that move or copy existing content (the output is not computed here).
COPIERS = {"cp", "mv", "ln", "install", "rsync", "dd", "scp", "tar", "unzip", "gunzip", "zcat",
           "bunzip2", "xz", "7z", "base64", "xxd", "uudecode", "openssl", "git", "cat", "head",
           "tail", "curl", "wget", "aria2c", "gsutil", "aws", "rclone", "huggingface-cli"}
#: Commands that change a file's text in place, as an editor would.
IN_PLACE_EDITORS = {"sed", "perl", "awk", "gawk", "ed", "ex", "vi", "vim", "nano", "emacs", "truncate"}
#: Interpreters: their first non-option argument is the program they run.
INTERPRETERS = {"python", "python3", "python2", "pypy", "pypy3", "bash", "sh", "zsh", "dash",
                "Rscript", "R", "node", "julia", "ruby", "perl", "lua", "java", "torchrun",
                "deepspeed", "accelerate", "jupyter", "ipython", "uv", "poetry", "conda", "pixi"}
#: Commands that only look at files (reading them is an access, not a write).
READERS = {"cat", "head", "tail", "less", "more", "grep", "egrep", "fgrep", "rg", "awk", "sed",
           "cut", "sort", "uniq", "wc", "diff", "cmp", "md5sum", "sha256sum", "sha1sum", "strings",
           "od", "xxd", "hexdump", "file", "stat", "ls", "find", "tac", "nl", "paste", "join",
           "column", "jq", "csvlook", "python", "python3", "cp", "tar", "zcat", "base64", "du",
           "realpath", "readlink", "locate", "tree", "vim", "vi", "nano", "view"}


class WriteHow(enum.StrEnum):
    """How a command wrote a file."""

    #: The text was typed into the command: ``echo``/``printf`` redirected, a here-document,
    #: an in-place ``sed``, or a redirect of nothing (``> file``).
    HAND = "hand"
    #: Existing content was copied or moved (``cp``, ``mv``, ``cat a > b``, ``curl -o``).
    COPY = "copy"
    #: A program's output (``python train.py > log.txt``).
    PROCESS = "process"


@define
class Write:
    """One file a command writes: ``path`` as written in the command, ``how``,
    ``tool`` (the command that produced the text), ``sources`` (for copies) and
    ``literal`` (the text itself, for hand writes)."""

    path: str
    how: WriteHow
    tool: str
    sources: list[str] = field(factory=list)
    literal: str | None = None
    append: bool = False


@define
class SimpleCommand:
    """One command of a pipeline: its words (variable assignments and wrappers
    removed), redirections and here-document body."""

    words: list[str] = field(factory=list)
    redirects: list[tuple[str, str]] = field(factory=list)
    heredoc: str | None = None
    herestring: str | None = None
    piped_from: SimpleCommand | None = None

    @property
    def name(self) -> str:
        return _basename(self.words[0]) if self.words else ""

    @property
    def args(self) -> list[str]:
        return self.words[1:]


@define
class ProgramRun:
    """A program a command runs: the interpreter (or the program itself) and its
    script or module, with the remaining arguments."""

    program: str
    script: str | None = None
    module: str | None = None
    code: str | None = None
    args: list[str] = field(factory=list)


@define
class CommandInfo:
    """What one shell command line does, as far as the checks care."""

    text: str
    commands: list[SimpleCommand] = field(factory=list)
    writes: list[Write] = field(factory=list)
    runs: list[ProgramRun] = field(factory=list)
    words: list[str] = field(factory=list)
    urls: list[str] = field(factory=list)
    heredocs: list[str] = field(factory=list)
    literals: list[str] = field(factory=list)
    parsed: bool = True

    def literal_text(self) -> str:
        """Every piece of text typed into the command (for "was this number typed?")."""
        return "\n".join([self.text, *self.heredocs])


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def split_heredocs(text: str) -> tuple[str, list[str]]:
    """The command line without its here-document bodies, and the bodies in order."""
    lines = text.split("\n")
    out: list[str] = []
    bodies: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        blanked = _strip_quoted(line)
        for pos in [m.start() for m in re.finditer(r"(?<!<)<<(?!<)", blanked)]:
            match = _HEREDOC_START.match(line, pos)
            if match is None:
                continue
            strip_tabs = match.group(1) == "-"
            delim = match.group(2) if match.group(2) is not None else (
                match.group(3) if match.group(3) is not None else match.group(4))
            body: list[str] = []
            while i < len(lines):
                candidate = lines[i].lstrip("\t") if strip_tabs else lines[i]
                i += 1
                if candidate == delim:
                    break
                body.append(candidate)
            bodies.append("\n".join(body))
    return "\n".join(out), bodies


def _strip_quoted(line: str) -> str:
    """``line`` with the inside of quoted strings blanked (so ``echo "<<EOF"`` is no here-doc),
    lengths kept."""
    out = []
    quote = ""
    for ch in line:
        if quote:
            out.append(" " if ch != quote else ch)
            if ch == quote:
                quote = ""
        else:
            if ch in "'\"":
                quote = ch
            out.append(ch)
    return "".join(out)


def _tokens(text: str) -> tuple[list[str], bool]:
    lexer = shlex.shlex(text, posix=True, punctuation_chars=_PUNCT)
    lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    lexer.commenters = "#"
    try:
        return list(lexer), True
    except ValueError:  # an unbalanced quote: fall back to blanks
        return [w for w in re.split(r"[ \t\r]+", text.replace("\n", " ; ")) if w], False


def _strip_wrappers(words: list[str]) -> list[str]:
    """Drop ``VAR=value`` assignments and wrappers (``nohup``, ``timeout 60``, ``env -i``)."""
    i = 0
    while i < len(words):
        word = words[i]
        if _ASSIGNMENT.match(word):
            i += 1
            continue
        name = _basename(word)
        if name in WRAPPERS:
            i += 1
            # the wrapper's own options and arguments (timeout's duration, nice's -n 10)
            while i < len(words) and (words[i].startswith("-") or _ASSIGNMENT.match(words[i])
                                      or (name in ("timeout", "nice", "taskset", "chrt")
                                          and re.fullmatch(r"[\d.]+[smhd]?|0x[0-9a-f]+", words[i]))):
                if words[i] in ("-n", "-s", "-k", "-u", "-c", "-p") and i + 1 < len(words):
                    i += 1
                i += 1
            continue
        break
    return words[i:]


def _split_commands(tokens: list[str], text: str, heredocs: list[str]) -> list[SimpleCommand]:
    commands: list[SimpleCommand] = []
    current = SimpleCommand()
    pending_pipe: SimpleCommand | None = None
    bodies = iter(heredocs)
    i = 0

    def finish(pipe: bool) -> None:
        nonlocal current, pending_pipe
        current.words = _strip_wrappers(current.words)
        if current.words or current.redirects:
            current.piped_from = pending_pipe
            commands.append(current)
            pending_pipe = current if pipe else None
        else:
            pending_pipe = None
        current = SimpleCommand()

    while i < len(tokens):
        tok = tokens[i]
        if tok in _SEPARATORS or (tok and set(tok) <= set(_PUNCT) and tok not in _REDIRECTS
                                  and not tok.startswith((">", "<", "&>"))):
            finish(pipe=tok in ("|", "|&"))
            i += 1
            continue
        if tok in _REDIRECTS or (tok and set(tok) <= set("<>&|") and tok.startswith((">", "<", "&>"))):
            target = tokens[i + 1] if i + 1 < len(tokens) else ""
            fd = ""
            if current.words and current.words[-1].isdigit() and f"{current.words[-1]}{tok}" in text:
                fd = current.words.pop()
            if tok in ("<<", "<<-"):
                current.heredoc = next(bodies, "")
            elif tok == "<<<":
                current.herestring = target
            elif tok == ">&" and target.isdigit():
                pass  # 2>&1: a duplication, no file
            else:
                current.redirects.append((fd + tok, target))
            i += 2
            continue
        current.words.append(tok)
        i += 1
    finish(pipe=False)
    return commands


def _options_value(args: list[str], names: Iterable[str]) -> str | None:
    names = set(names)
    for j, arg in enumerate(args):
        if arg in names and j + 1 < len(args):
            return args[j + 1]
        for name in names:
            if name.startswith("--") and arg.startswith(name + "="):
                return arg.split("=", 1)[1]
            if not name.startswith("--") and arg.startswith(name) and len(arg) > len(name):
                return arg[len(name):]
    return None


def _positional(args: list[str]) -> list[str]:
    return [a for a in args if not a.startswith("-")]


def _producer(cmd: SimpleCommand) -> tuple[WriteHow, str, list[str], str | None]:
    """How the text ``cmd`` prints was made: (how, tool, sources, literal)."""
    name = cmd.name
    if not cmd.words:
        return WriteHow.HAND, "redirect", [], ""
    if name in LITERAL_WRITERS:
        return WriteHow.HAND, name, [], " ".join(cmd.args)
    if name == "cat" or name in ("tac", "head", "tail"):
        if cmd.heredoc is not None:
            return WriteHow.HAND, f"{name} here-document", [], cmd.heredoc
        if cmd.herestring is not None:
            return WriteHow.HAND, f"{name} here-string", [], cmd.herestring
        sources = _positional(cmd.args)
        if sources:
            return WriteHow.COPY, name, sources, None
        if cmd.piped_from is not None:
            return _producer(cmd.piped_from)
        return WriteHow.HAND, name, [], None
    if name in ("base64", "xxd", "uudecode", "openssl") and (cmd.heredoc is not None
                                                             or cmd.herestring is not None):
        return WriteHow.HAND, f"{name} decoding typed text", [], cmd.heredoc or cmd.herestring
    if name in ("base64", "xxd") and cmd.piped_from is not None:
        how, tool, sources, literal = _producer(cmd.piped_from)
        if how is WriteHow.HAND:
            return WriteHow.HAND, f"{tool} | {name}", sources, literal
        return WriteHow.COPY, name, sources, None
    if name in ("tee",) and cmd.piped_from is not None:
        return _producer(cmd.piped_from)
    if name in ("curl", "wget", "aria2c"):
        return WriteHow.COPY, name, [u for u in cmd.args if "://" in u], None
    if name in ("zcat", "gunzip", "bunzip2", "xz", "unzip", "tar"):
        return WriteHow.COPY, name, _positional(cmd.args), None
    return WriteHow.PROCESS, name, [], None


def _writes_of(cmd: SimpleCommand) -> list[Write]:
    writes: list[Write] = []
    for op, target in cmd.redirects:
        if op.startswith("<") or not target or target.startswith("&") or target == "/dev/null":
            continue
        if op.startswith("2"):
            continue  # standard error: messages, not results
        how, tool, sources, literal = _producer(cmd)
        writes.append(Write(path=target, how=how, tool=tool, sources=sources, literal=literal,
                            append=">>" in op))
    name = cmd.name
    args = cmd.args
    if name == "tee":
        how, tool, sources, literal = _producer(cmd)
        for target in _positional(args):
            if target != "/dev/null":
                writes.append(Write(path=target, how=how, tool=f"{tool} | tee", sources=sources,
                                    literal=literal, append="-a" in args or "--append" in args))
    elif name in ("cp", "mv", "install", "rsync", "ln", "scp"):
        pos = _positional(args)
        target_dir = _options_value(args, ("-t", "--target-directory"))
        if target_dir:
            for src in pos:
                writes.append(Write(path=f"{target_dir.rstrip('/')}/{_basename(src)}", how=WriteHow.COPY,
                                    tool=name, sources=[src]))
        elif len(pos) >= 2:
            dest = pos[-1]
            for src in pos[:-1]:
                path = f"{dest.rstrip('/')}/{_basename(src)}" if dest.endswith("/") or len(pos) > 2 else dest
                writes.append(Write(path=path, how=WriteHow.COPY, tool=name, sources=[src]))
    elif name == "dd":
        source = next((a[3:] for a in args if a.startswith("if=")), None)
        output = next((a[3:] for a in args if a.startswith("of=")), None)
        if output:
            writes.append(Write(path=output, how=WriteHow.COPY, tool=name, sources=[source] if source else []))
    elif name in ("curl", "wget", "aria2c"):
        saved = _options_value(args, ("-o", "--output", "-O" if name == "wget" else "--output-document",
                                      "--output-document"))
        if saved and saved != "-":
            writes.append(Write(path=saved, how=WriteHow.COPY, tool=name,
                                sources=[u for u in args if "://" in u]))
    elif name in ("sed", "perl") and any(a == "-i" or a.startswith("-i") or a.startswith("-pi")
                                          or a == "--in-place" for a in args):
        pos = _positional(args)
        script_given = _options_value(args, ("-e", "--expression")) is not None
        files = pos if script_given else pos[1:]
        for target in files:
            writes.append(Write(path=target, how=WriteHow.HAND, tool=f"{name} -i",
                                literal=" ".join(args)))
    elif name == "truncate":
        for target in _positional(args):
            if not re.fullmatch(r"[\d.]+[KMGkmg]?", target):
                writes.append(Write(path=target, how=WriteHow.HAND, tool=name, literal=""))
    elif name == "touch":
        pass  # no content
    return writes


def _runs_of(cmd: SimpleCommand) -> ProgramRun | None:
    if not cmd.words:
        return None
    name = cmd.name
    args = cmd.args
    if re.fullmatch(r"python[\d.]*|pypy3?", name) or name in ("ipython",):
        j = 0
        while j < len(args):
            a = args[j]
            if a == "-m" and j + 1 < len(args):
                return ProgramRun(program=name, module=args[j + 1], args=args[j + 2:])
            if a == "-c" and j + 1 < len(args):
                return ProgramRun(program=name, code=args[j + 1], args=args[j + 2:])
            if a.startswith("-c") and len(a) > 2:
                return ProgramRun(program=name, code=a[2:], args=args[j + 1:])
            if a in ("-W", "-X", "-Q") and j + 1 < len(args):
                j += 2
                continue
            if a == "-":
                return ProgramRun(program=name, code=cmd.heredoc or cmd.herestring, args=args[j + 1:])
            if not a.startswith("-"):
                return ProgramRun(program=name, script=a, args=args[j + 1:])
            j += 1
        if cmd.heredoc is not None or cmd.herestring is not None:
            return ProgramRun(program=name, code=cmd.heredoc or cmd.herestring)
        return ProgramRun(program=name)
    if name in ("torchrun", "deepspeed", "accelerate"):
        pos = [a for a in args if a.endswith(".py")]
        return ProgramRun(program=name, script=pos[0] if pos else None, args=args)
    if name in ("uv", "poetry", "conda", "pixi") and args[:1] == ["run"]:
        inner = SimpleCommand(words=_strip_wrappers(args[1:]), heredoc=cmd.heredoc)
        return _runs_of(inner) or ProgramRun(program=name, args=args)
    if name in ("bash", "sh", "zsh", "dash", "Rscript", "node", "julia", "ruby", "lua"):
        pos = [a for a in args if not a.startswith("-")]
        if "-c" in args:
            idx = args.index("-c")
            return ProgramRun(program=name, code=args[idx + 1] if idx + 1 < len(args) else None)
        if pos:
            return ProgramRun(program=name, script=pos[0], args=pos[1:])
        return ProgramRun(program=name, code=cmd.heredoc)
    if cmd.words[0].startswith(("./", "/")) and name not in READERS | COPIERS | LITERAL_WRITERS:
        return ProgramRun(program=name, script=cmd.words[0], args=args)
    if name in ("make", "cmake", "cargo", "go", "gcc", "g++", "javac", "java", "pytest", "jupyter"):
        return ProgramRun(program=name, args=args)
    return None


#: Commands that cannot change a file (without a redirection): after a step made only of
#: these, the monitor takes no listing (what background programs wrote is seen at the next one).
LOOK_ONLY = frozenset({"cat", "ls", "head", "tail", "grep", "egrep", "fgrep", "rg", "wc", "pwd", "echo",
                       "printf", "sleep", "nvidia-smi", "du", "df", "stat", "file", "which", "type",
                       "whoami", "id", "date", "uptime", "free", "ps", "less", "more", "tree", "diff",
                       "cmp", "md5sum", "sha256sum", "sha1sum", "jq", "sort", "uniq", "cut", "tr", "cd",
                       "true", ":", "test", "[", "basename", "dirname", "realpath", "readlink", "seq",
                       "nproc", "hostname", "uname", "column", "nl", "tac", "od", "hexdump", "strings",
                       "find", "lscpu", "env", "printenv", "history", "clear"})
_FIND_WRITERS = {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}


def looks_only(info: CommandInfo) -> bool:
    """True when every command of ``info`` only looks (``ls``, ``cat x``, ``tail log``,
    ``sleep 5``, ``find`` without ``-exec``/``-delete``) and nothing is redirected into a file."""
    if not info.parsed or not info.commands or "$(" in info.text or "`" in info.text or "<(" in info.text \
            or ">(" in info.text:
        return False
    for cmd in info.commands:
        if cmd.name not in LOOK_ONLY or cmd.heredoc is not None:
            return False
        if any(not op.startswith("<") and target != "/dev/null" for op, target in cmd.redirects):
            return False
        if cmd.name == "find" and any(a in _FIND_WRITERS for a in cmd.args):
            return False
        if cmd.name in ("sort",) and any(a == "-o" or a.startswith("--output") for a in cmd.args):
            return False
    return True


def urls_in(text: str) -> list[str]:
    """URLs in ``text`` (``scheme://...``, ``git@host:path`` and bare ``host.org/path``)."""
    found = [m.group(0).rstrip(".,'\"") for m in _URL.finditer(text)]
    rest = _URL.sub(" ", text)
    found += [m.group(0).rstrip(".,'\"") for m in _BARE_URL.finditer(rest)
              if "/" in m.group(0) or m.group(0).lower().startswith("www.")]
    out: list[str] = []
    for url in found:
        if url not in out:
            out.append(url)
    return out


def parse_command(text: str) -> CommandInfo:
    """Read one shell command line (see the module docstring)."""
    logical, heredocs = split_heredocs(text)
    tokens, parsed = _tokens(logical)
    commands = _split_commands(tokens, logical, heredocs)
    info = CommandInfo(text=text, commands=commands, heredocs=heredocs, parsed=parsed,
                       words=[w for c in commands for w in c.words],
                       urls=urls_in(text))
    for cmd in commands:
        info.writes.extend(_writes_of(cmd))
        run = _runs_of(cmd)
        if run is not None:
            info.runs.append(run)
        if cmd.name in LITERAL_WRITERS:
            info.literals.append(" ".join(cmd.args))
        if cmd.heredoc is not None:
            info.literals.append(cmd.heredoc)
        if cmd.herestring is not None:
            info.literals.append(cmd.herestring)
        if run is not None and run.code:
            info.literals.append(run.code)
    return info


def path_words(info: CommandInfo) -> list[str]:
    """The words of a command that look like paths (``data/x.csv``, ``/eval``, ``../a``),
    redirection targets included."""
    out: list[str] = []
    for cmd in info.commands:
        for word in [*cmd.words, *(t for _, t in cmd.redirects)]:
            for part in re.split(r"[=,:]", word) if "://" not in word else [word]:
                if ("/" in part or "." in part) and "://" not in part and not part.startswith("-") \
                        and len(part) < 4096:
                    out.append(part)
    return out


__all__ = ["COPIERS", "INTERPRETERS", "LITERAL_WRITERS", "LOOK_ONLY", "CommandInfo", "ProgramRun", "SimpleCommand",
           "Write", "WriteHow", "looks_only", "parse_command", "path_words", "split_heredocs", "urls_in"]
