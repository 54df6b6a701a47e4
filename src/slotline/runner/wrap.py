"""The exit-code keeper: runs one command, caps its log, writes its exit status to a file.

Past the log's cap the keeper keeps the last `TAIL` bytes of the output it drops in a
side file (`N.tail` beside `N.log`), rewritten at most every `TAIL_EVERY` seconds and at
the end: the run's final result (what it spent, its session) is still read from it, and
its changing mtime shows the stall watch that a capped run still prints.

A keeper runs `main(EXIT_FILE MEMORY_MB CWD LOG_MAX_BYTES FENCE -- ARGV...)` in its own session,
with stdout (and stderr) appended to the attempt's log file. It survives the node that
started it, so a restarted node can collect the exit status of an agent it re-adopted; it
ignores SIGTERM/SIGINT/SIGHUP (they reach the command through the process group); and it
imports nothing beyond the standard library core, to start fast.

Keepers are forked by a keeper server, `python -I -S wrap.py --serve`, that a node starts
once: a fork of this small process costs about a millisecond, where starting an
interpreter per command cost 10-60 ms of CPU (more on a loaded machine). The server reads
one request per line on its stdin and answers each with the keeper's pid; it exits when
its stdin closes (its node stopped or died), and the keepers it forked live on in their
own sessions. `python -I -S wrap.py EXIT_FILE ...` runs one keeper directly.

FENCE is empty, or `NOT_AFTER:MARGIN:COMMITTED:FENCE_FILE` on a store other nodes share:
the keeper stops its run (TERM to the group, KILL at the lease) once its node has not
confirmed a heartbeat for the lease less the margin, before another node may reclaim the
run; it never starts a run claimed that long ago; and once its command exits it KILLs
what the command left in its group (and itself), as the node would. The why and the
protocol: `slotline/fencing.py`.
"""

# `_signal`, not `signal`: the latter imports enum, which costs ~6 ms at every start.
import _signal as signal  # type: ignore[import-not-found]
import os
import select
import sys
import time

CHUNK = 65536
# The rolling tail of what is dropped past the cap, and how often it is rewritten.
TAIL = 65536
TAIL_EVERY = 0.5
# Room for the exit status, taken when the keeper starts (`N.exit.reserved`): on a disk
# that fills up during the run the status is written there in place, needing no new block.
RESERVED = 32
# Without that room, how long the keeper keeps the status in memory and tries again.
EXIT_RETRY = 30.0
EXIT_RETRY_EVERY = 0.5
# How often, at most, a fenced run's keeper checks its fence while it waits for its command.
FENCE_EVERY = 0.2


def _write(path: str, text: str | bytes) -> None:
    """Replace `path` with `text` whole, or raise OSError and leave it as it was: a short
    write (a full disk) is never renamed over it."""
    tmp = path + ".tmp"
    data = text.encode() if isinstance(text, str) else text
    # Atomic against a crash of any process (rename); no fsync: a machine crash ends the
    # command too, so there would be nothing left to collect.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        _write_all(fd, data)
    except OSError:
        os.close(fd)
        _unlink(tmp)
        raise
    os.close(fd)
    os.replace(tmp, path)


def _unlink(path: str) -> None:
    try:  # noqa: SIM105 - as in _log
        os.unlink(path)
    except OSError:
        pass


def _reserve(exit_file: str) -> None:
    """Take room for the exit status now, best effort (a full disk already: none)."""
    try:  # noqa: SIM105 - as in _log
        _write(exit_file + ".reserved", b" " * RESERVED)
    except OSError:
        pass


def _write_exit(exit_file: str, code: int) -> None:
    """Write the exit status; on a full disk into the room `_reserve` took (overwritten
    in place, then renamed; a node reads either file), else keep it in memory and try
    again for `EXIT_RETRY` seconds. A node that finds no status then says why."""
    text = f"{code}\n"
    reserved = exit_file + ".reserved"
    deadline = time.monotonic() + EXIT_RETRY
    while True:
        try:
            _write(exit_file, text)
        except OSError:
            pass
        else:
            _unlink(reserved)
            return
        try:
            fd = os.open(reserved, os.O_WRONLY)
            try:
                whole = os.pwrite(fd, text.ljust(RESERVED).encode(), 0) == RESERVED
            finally:
                os.close(fd)
        except OSError:
            whole = False
        if whole:
            try:  # noqa: SIM105 - as in _log
                os.replace(reserved, exit_file)
            except OSError:
                pass
            return
        if time.monotonic() >= deadline:
            return
        time.sleep(EXIT_RETRY_EVERY)


def _start(command: list[str], memory_mb: str, out: int | None) -> int:
    """Start the command with its output on `out` (None: on the keeper's own stdout and
    stderr, a terminal's); returns its pid, or -1 if it could not be started (the reason
    is in the log)."""
    if memory_mb == "0":
        # posix_spawn (a vfork, not a copy of this process) where no limit has to be set
        # between fork and exec: a fork of even this small interpreter costs about a
        # millisecond of CPU per command.
        outputs = (
            [] if out is None else [(os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, out, 2)]
        )
        try:
            return os.posix_spawnp(
                command[0],
                command,
                os.environ,
                file_actions=outputs,
                setsigdef=(signal.SIGTERM, signal.SIGINT, signal.SIGHUP),
            )
        except OSError as exc:
            os.write(2, f"slotline: cannot start {command[0]}: {exc.strerror}\n".encode())
            return -1
    pid = os.fork()
    if pid == 0:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        if out is not None:
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.close(out)
        try:
            if memory_mb != "0":
                import resource

                limit = int(memory_mb) * 1024 * 1024
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            os.execvp(command[0], command)  # noqa: S606 - an argv list, no shell
        except OSError as exc:
            os.write(2, f"slotline: cannot start {command[0]}: {exc.strerror}\n".encode())
        os._exit(127)
    return pid


# The boot clock, shared with the node (`slotline.fencing.clock`): it counts a suspended
# machine's sleep, and the wall clock may jump.
_CLOCK = getattr(time, "CLOCK_BOOTTIME", time.CLOCK_MONOTONIC)


# Why a keeper whose claim is too old did not start its command: the node puts such a
# run back in line uncounted (`runner/process.py`).
NOT_STARTED = "not started, its claim being that old"


class Fence:
    """When this keeper must stop its run: its deadline, renewed from its node's fence file
    by heartbeats sent after its claim committed (see `slotline/fencing.py`)."""

    def __init__(self, spec: str, exit_file: str) -> None:
        not_after, margin, committed, self.path = spec.split(":", 3)
        self.deadline, self.margin = float(not_after), float(margin)
        self.committed = float(committed)
        self.marker = exit_file.removesuffix(".exit").removesuffix(".fexit") + ".fenced"
        self.kill_at: float | None = None

    def _renew(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                sent, lease, margin = (float(x) for x in os.read(fd, 200).split())
            finally:
                os.close(fd)
        except (OSError, ValueError):
            return  # no later heartbeat confirmed: the deadline stands
        # A heartbeat sent before the claim committed may not have renewed the run.
        if sent >= self.committed:
            self.deadline = max(self.deadline, sent + lease - margin)

    def lapsed(self) -> bool:
        """Whether the run may no longer go on (re-reading the file once it seems so)."""
        now = time.clock_gettime(_CLOCK)
        if now < self.deadline:
            return False
        self._renew()
        return now >= self.deadline

    def fence(self, why: str) -> None:
        """Say why the run is stopped (the node reads the marker); KILL is due at the
        lease, a margin past the deadline, however late this keeper noticed."""
        self.kill_at = self.deadline + self.margin
        text = (
            f"fenced: its node confirmed no heartbeat for its lease less {self.margin:.1f}s; {why}"
        )
        try:  # noqa: SIM105 - no contextlib: the keeper imports only the core
            _write(self.marker, text + "\n")
        except OSError:
            pass
        _log(f"\n[slotline: {text}]\n".encode())

    def check(self, exit_file: str) -> None:
        """In the keeper's loop: fence the run once its deadline passed (TERM to its
        group), and KILL the group, this keeper included, at the lease if it is still
        there."""
        if self.kill_at is None:
            if not self.lapsed():
                return
            self.fence("stopped so that another node may take the task")
            _signal_group(signal.SIGTERM)
        if time.clock_gettime(_CLOCK) >= (self.kill_at or 0.0):
            try:  # noqa: SIM105 - as above
                _write(exit_file, f"{-signal.SIGKILL}\n")
            except OSError:
                pass
            _signal_group(signal.SIGKILL)


def _signal_group(sig: int) -> None:
    """Signal this keeper's process group, its command's (the keeper ignores TERM)."""
    try:  # noqa: SIM105 - as in Fence
        os.killpg(os.getpid(), sig)
    except OSError:
        pass


def _wait(pid: int, fence: Fence | None, exit_file: str) -> int:
    """The command's wait status, once it exits; a command that closed its output goes
    on being fenced meanwhile, checked at least every FENCE_EVERY seconds. The first
    checks come sooner (1 ms, then twice as long each time): a command's output closes
    as it exits, a moment before its status can be collected, and a fixed 0.2 s wait
    delayed a third of the ends of short commands by that much."""
    if fence is None:
        return os.waitpid(pid, 0)[1]
    pause = 0.001
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        fence.check(exit_file)
        time.sleep(pause)
        pause = min(pause * 2, FENCE_EVERY)


def ended(fence: Fence | None) -> None:
    """After the exit status is written: where runs are fenced, what the command left in
    its group goes now, with this keeper, as a node does once a keeper exits; a frozen
    node could not, and another node may start the task again."""
    if fence is not None:
        _signal_group(signal.SIGKILL)


def _pump(
    source: int,
    pid: int | None,
    cap: int,
    tail_path: str,
    fence: Fence | None = None,
    exit_file: str = "",
) -> int:
    """Copy the command's output to our stdout (the log) up to `cap` bytes, draining the
    rest so the command never blocks on a full pipe; the last `TAIL` bytes of what is
    dropped go to `tail_path`; fence the run when `fence` says. Returns the wait status
    (0 without a `pid`: a terminal's output, copied until the terminal closes)."""
    written = dropped = 0
    status = None
    tail = bytearray()
    tail_dirty = False
    tail_at = 0.0
    while True:
        if fence is not None:
            fence.check(exit_file)
        ready, _, _ = select.select([source], [], [], FENCE_EVERY)
        if not ready:
            if tail_dirty:
                _save_tail(tail_path, tail)
                tail_dirty, tail_at = False, time.monotonic()
            if pid is None:
                continue
            # Quiet for a moment: if the command has exited, background children it left
            # holding the pipe open must not keep the attempt alive.
            done, wait_status = os.waitpid(pid, os.WNOHANG)
            if done:
                status = wait_status
                break
            continue
        data = os.read(source, CHUNK)
        if not data:
            break
        room = max(0, cap - written)
        if room:
            _log(data[:room])
            written += min(room, len(data))
        if len(data) > room:
            if not dropped:  # the first byte past the cap (a read may have ended at it)
                marker = f"\n[slotline: log cap of {cap} bytes reached; the rest is dropped]\n"
                _log(marker.encode())
            dropped += len(data) - room
            tail += data[room:]
            del tail[:-TAIL]
            tail_dirty = True
            now = time.monotonic()
            if now - tail_at >= TAIL_EVERY:
                _save_tail(tail_path, tail)
                tail_dirty, tail_at = False, now
    if tail_dirty:
        _save_tail(tail_path, tail)
    if status is None:
        status = 0 if pid is None else _wait(pid, fence, exit_file)
    if dropped:
        _log(f"[slotline: {dropped} bytes of output dropped]\n".encode())
    return status


def _log(data: bytes) -> None:
    """Append to the log, best effort: a full disk (or a log removed under the run) must
    not end the keeper, which still drains the command and writes its exit status."""
    try:  # noqa: SIM105 - no contextlib: the keeper imports only the core
        os.write(1, data)
    except OSError:
        pass


def _save_tail(path: str, tail: bytearray) -> None:
    """Rewrite the tail file, best effort (as `_log`); a failed try leaves no temporary."""
    try:
        _write(path, bytes(tail))
    except OSError:
        try:  # noqa: SIM105 - as in _log
            os.unlink(path + ".tmp")
        except OSError:
            pass


def serve() -> int:
    """Fork a keeper for each request read on stdin: a JSON object with `argv` (the
    arguments of `main`), `env` (the command's whole environment) and `log` (the log
    file); answer each, in order, with its pid, or `!` and why it could not be started.

    The requests waiting together (a claim that started several runs) are forked one
    after the other before the first answer is awaited, so that the keepers become
    session leaders side by side, not each in turn."""
    # Keepers are reaped by the kernel as they exit: a node waits on them through a
    # pidfd or a kqueue (or polls) and reads their exit files, as it does for keepers it
    # re-adopted.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    pending = b""
    while True:
        data = os.read(0, CHUNK)  # waits for the next request
        if not data:
            return 0
        pending += data
        while select.select([0], [], [], 0)[0]:  # and takes those sent meanwhile
            more = os.read(0, CHUNK)
            pending += more
            if not more:
                break
        *lines, pending = pending.split(b"\n")
        forked: list[tuple[str, int]] = []
        for line in lines:
            forked.append(_fork_keeper(line, [ready for _, ready in forked if ready >= 0]))
        for answer, ready in forked:
            if ready >= 0:
                # Answer once the keeper leads its own session (or is gone): a stop
                # request signals the group named by its pid, which must exist by then.
                os.read(ready, 1)
                os.close(ready)
            _write_all(1, f"{answer}\n".encode())


def _fork_keeper(line: bytes, inherited: list[int]) -> tuple[str, int]:
    """Fork the keeper a request (a line of JSON) asks for; its pid and the pipe that
    closes once it leads its session (in the keeper, the pipes of the keepers forked
    before it, `inherited`, are closed), or `!` and why with -1. A request it cannot
    read is answered so, never the end of the server (which would leave the requests
    forked beside it unanswered, to be sent again)."""
    import json

    try:
        request = json.loads(line)
        argv, env, log = request["argv"], request["env"], request["log"]
    except (ValueError, TypeError, KeyError) as exc:
        return f"! not a keeper request: {type(exc).__name__}", -1
    ready, in_session = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(ready)
        os.close(in_session)
        return f"! {exc.strerror}", -1
    if pid == 0:
        _keep(argv, env, log, in_session, (ready, *inherited))
    os.close(in_session)
    return str(pid), ready


def _write_all(fd: int, data: bytes) -> None:
    done = 0
    while done < len(data):
        done += os.write(fd, data[done:])


def _keep(
    argv: list[str], env: dict[str, str], log: str, in_session: int, server_fds: tuple[int, ...]
) -> None:
    """In a child of the server: become a keeper in a session of its own, never return.
    `server_fds`: the server's pipes this child has copies of, closed first."""
    code = 1
    try:
        for fd in server_fds:
            os.close(fd)
        os.setsid()
        os.close(in_session)  # tells the server
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.environ.clear()
        os.environ.update(env)
        code = main(argv)
    finally:
        os._exit(code)


def pane(argv: list[str]) -> int:
    """The keeper of an interactive run, the first process of its tmux pane:
    `wrap.py --pane SPEC_FILE EXIT_FILE MEMORY_MB LOG_MAX_BYTES FENCE`.

    As `main`, but the command keeps the pane's terminal as its stdin, stdout and stderr
    (tmux copies what it prints to the log: `tee`). What it runs, where and with which
    environment (`{"argv", "cwd", "env"}`) is in SPEC_FILE, which the node wrote (mode
    0600) and this removes: on tmux's command line, a key would be in every `ps` and
    tmux would parse the arguments. Of the pane's own variables only TERM is kept."""
    import json

    spec_file, exit_file, memory_mb, log_max, fence = argv
    with open(spec_file, encoding="utf-8") as file:
        spec = json.load(file)
    _unlink(spec_file)
    term = os.environ.get("TERM", "screen-256color")
    os.environ.clear()
    os.environ.update(spec["env"])
    os.environ["TERM"] = term
    # The terminal hangs up (its session or pane killed, its server gone): the kernel
    # tells the keeper, its session's leader, alone. The command gets it too, once, and
    # ends as it would in any terminal that closed; its exit status is then written.
    signal.signal(signal.SIGHUP, _hang_up)
    keeper = [exit_file, memory_mb, spec["cwd"], log_max, fence, "--", *spec["argv"]]
    return main(keeper, in_terminal=True)


def _hang_up(signum: int, frame: object) -> None:
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    _signal_group(signal.SIGHUP)


def tee(argv: list[str]) -> int:
    """`wrap.py --tee LOG_FILE LOG_MAX_BYTES`: what an interactive run's pane prints, read
    on stdin (tmux's `pipe-pane`), appended to its log up to the cap as `main` does, escape
    sequences and all; `LOG_FILE.teed` says it is all there (the node reads the log at the
    run's end only then)."""
    log_file, log_max = argv
    out = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(out, 1)
    os.close(out)
    stem = log_file.removesuffix(".log")
    _pump(0, None, int(log_max), stem + ".tail")
    try:  # noqa: SIM105 - as in _log
        _write(stem + ".teed", b"")
    except OSError:
        pass
    return 0


def main(argv: list[str], in_terminal: bool = False) -> int:
    # Nothing of the node but stdin, stdout and stderr: an inherited socket or pipe would
    # outlive the node in this keeper (the node closes them at spawn too; this is the
    # fallback where it cannot list its descriptors).
    os.closerange(3, max(os.sysconf("SC_OPEN_MAX"), 3))
    exit_file, memory_mb, cwd, log_max, fence_spec, sep, *command = argv
    if sep != "--" or not command:
        sys.stderr.write("usage: wrap.py EXIT_FILE MEMORY_MB CWD LOG_MAX_BYTES FENCE -- ARGV...\n")
        return 2
    fence = Fence(fence_spec, exit_file) if fence_spec else None
    if fence is not None and fence.lapsed():
        fence.fence(NOT_STARTED)
        return 0
    # The pid file lets a node that crashed between spawning and recording the pid
    # still find (and re-adopt) this run.
    _write(exit_file.removesuffix(".exit") + ".pid", f"{os.getpid()}\n")
    _reserve(exit_file)
    if cwd:
        try:
            os.chdir(cwd)
        except OSError as exc:
            sys.stderr.write(f"slotline: cannot enter workspace {cwd}: {exc.strerror}\n")
            _write_exit(exit_file, 127)
            return 0
    # Ignore stop signals before forking so no window leaves the keeper killable; the
    # command gets the default dispositions back before exec. (A keeper in a terminal
    # passes a hang-up on to its command: `pane`.)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        if not (in_terminal and sig == signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
    if in_terminal:
        pid = _start(command, memory_mb, None)
        if pid < 0:
            _write_exit(exit_file, 127)
            return 0
        status = _wait(pid, fence, exit_file)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        _write_exit(exit_file, code)
        ended(fence)
        return 0
    read_end, write_end = os.pipe()
    pid = _start(command, memory_mb, write_end)
    os.close(write_end)
    if pid < 0:
        _write_exit(exit_file, 127)
        return 0
    # The output pipe becomes the keeper's stdin (the command keeps /dev/null): the keeper
    # too holds fds 0, 1 and 2 only.
    os.dup2(read_end, 0)
    os.close(read_end)
    read_end = 0
    tail_path = exit_file.removesuffix(".exit") + ".tail"
    status = _pump(read_end, pid, int(log_max), tail_path, fence, exit_file)
    code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    _write_exit(exit_file, code)
    ended(fence)
    return 0


if __name__ == "__main__":
    MODES = {"--pane": pane, "--tee": tee}
    if sys.argv[1:] == ["--serve"]:
        sys.exit(serve())
    mode = MODES.get(sys.argv[1]) if len(sys.argv) > 1 else None
    sys.exit(mode(sys.argv[2:]) if mode is not None else main(sys.argv[1:]))
