"""Start, watch and stop the cluster's processes (by pid, never by name)."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

PR_SET_PDEATHSIG = 1
# kube-apiserver's graceful drain can take its full 60 s request timeout; nothing here needs
# it (every write is already in etcd, and etcd's page cache survives a killed process).
STOP_GRACE_S = 2.0


class StartupError(RuntimeError):
    pass


CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_RDONLY = 0x1
MS_REC = 0x4000
MS_SLAVE = 0x80000


@dataclass(frozen=True)
class NewMountNamespace:
    """Start the process in a mount namespace of its own: it sees this machine's mounts (and
    later ones), but its own mounts, and a fresh tmpfs on each of `private_tmpfs`, stay inside
    and vanish with the last process in it."""

    private_tmpfs: tuple[Path, ...] = ()


@dataclass(frozen=True)
class JoinMountNamespace:
    """Start the process in the mount namespace of the running process `pid`."""

    pid: int


@dataclass(frozen=True)
class OverlayMountNamespace:
    """Start the process in a mount namespace of its own where each ``(layer, target)`` directory pair
    shows ``layer``'s files over ``target`` (a read-only overlayfs), all else unchanged: how a program
    that reads a hard-coded path (Kueue's metrics certificates, /etc/kueue/metrics/certs) finds files
    that live in the cluster's directory, with nothing written outside it. Not root: a user namespace
    that maps only the caller's own uid and gid comes with it (unprivileged overlayfs, Linux 5.11+)."""

    layers: tuple[tuple[Path, Path], ...]


MountNamespace = NewMountNamespace | JoinMountNamespace | OverlayMountNamespace


def _mount_namespace_hook(namespace: MountNamespace) -> Callable[[], None]:
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before fork: the child only calls it

    def enter_new(private_tmpfs: tuple[bytes, ...]) -> None:
        if libc.unshare(CLONE_NEWNS) != 0:
            os._exit(126)
        if libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None) != 0:
            os._exit(126)
        for target in private_tmpfs:
            if libc.mount(b"tmpfs", target, b"tmpfs", 0, b"mode=755") != 0:
                os._exit(126)

    if isinstance(namespace, NewMountNamespace):
        targets = tuple(str(p).encode() for p in namespace.private_tmpfs)
        return lambda: enter_new(targets)
    if isinstance(namespace, OverlayMountNamespace):
        return _overlay_hook(libc, namespace)
    ns_path = f"/proc/{namespace.pid}/ns/mnt"

    def join() -> None:
        fd = os.open(ns_path, os.O_RDONLY)
        if libc.setns(fd, CLONE_NEWNS) != 0:
            os._exit(126)
        os.close(fd)

    return join


def _overlay_hook(libc: ctypes.CDLL, namespace: OverlayMountNamespace) -> Callable[[], None]:
    for layer, target in namespace.layers:
        if any(c in f"{layer}{target}" for c in ":,"):  # overlayfs's option separators
            raise StartupError(f"overlay paths may not contain ':' or ',': {layer}, {target}")
    mounts = tuple((str(target).encode(), f"lowerdir={layer}:{target}".encode()) for layer, target in namespace.layers)
    # Read before the fork: in a fresh user namespace the child is "nobody" until its maps are written.
    uid, gid, root = os.getuid(), os.getgid(), os.geteuid() == 0

    def fail(what: str) -> None:
        # The child's stderr is the component's log: say why it never started.
        os.write(2, f"devcluster: {what} failed: {os.strerror(ctypes.get_errno())}\n".encode())
        os._exit(126)

    def write(path: str, text: str) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, text.encode())
        finally:
            os.close(fd)

    def enter() -> None:
        if libc.unshare(CLONE_NEWNS | (0 if root else CLONE_NEWUSER)) != 0:
            fail("unshare (a mount namespace; for a user other than root, a user namespace)")
        if not root:
            write("/proc/self/setgroups", "deny")  # required before an unprivileged gid_map
            write("/proc/self/uid_map", f"{uid} {uid} 1")
            write("/proc/self/gid_map", f"{gid} {gid} 1")
        if libc.mount(b"none", b"/", None, MS_REC | MS_SLAVE, None) != 0:
            fail("making / a slave mount")
        for target, options in mounts:
            if libc.mount(b"overlay", target, b"overlay", MS_RDONLY, options) != 0:
                fail(f"mounting overlay {options.decode()} on {target.decode()}")

    return enter


def _die_with_parent_hook() -> Callable[[], None]:
    """A preexec_fn that makes the child get SIGKILL when the spawning thread's process dies.

    Used by test fixtures so that a killed pytest leaves no control plane behind. The CLI
    never uses it: `up` must leave the cluster running after it exits.
    """
    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)

    def hook() -> None:
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            os._exit(125)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(125)

    return hook


def spawn(
    argv: list[str],
    log_path: Path,
    *,
    die_with_parent: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    mount_namespace: MountNamespace | None = None,
) -> int:
    """Start `argv` in its own session (so signals to our terminal don't reach it); return its pid."""
    hooks = [_die_with_parent_hook()] if die_with_parent else []
    if mount_namespace is not None:
        hooks.append(_mount_namespace_hook(mount_namespace))

    def preexec() -> None:
        for hook in hooks:
            hook()

    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=preexec if hooks else None,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
    return proc.pid


def _reap(pid: int) -> None:
    """Collect the exit status if `pid` is our child, so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def is_alive(pid: int) -> bool:
    _reap(pid)
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    # The state field follows the parenthesised command name, which may itself contain ')'.
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def runs_executable(pid: int, executable: str) -> bool:
    """Guard against pid reuse: only signal a pid that still runs the binary we started."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0", 1)[0].decode()
    except OSError:
        return False
    return argv0 == executable


def stop_all(processes: Iterable[tuple[int, str]], grace: float = STOP_GRACE_S) -> None:
    """SIGTERM every (pid, executable) still ours, wait up to `grace`, then SIGKILL the rest.

    Each process leads its own process group, so the signal also reaches anything it forked.
    """
    targets = [pid for pid, exe in processes if is_alive(pid) and runs_executable(pid, exe)]
    for pid in targets:
        _signal_group(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(is_alive(pid) for pid in targets):
        time.sleep(0.05)
    for pid in targets:
        if is_alive(pid):
            _signal_group(pid, signal.SIGKILL)
    for pid in targets:
        _wait_gone(pid, timeout=5.0)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        return
    except PermissionError:
        os.kill(pid, sig)


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while is_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def log_tail(path: Path, chars: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError:
        return "(no log)"
