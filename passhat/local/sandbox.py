"""What one local attempt runs, where, and with which environment.

A trial must not see anything of the caller but what a user expects (PATH, locale, time
zone, terminal type), nor anything a previous trial left. So every attempt starts in an
empty working directory that is also its HOME and TMPDIR, with a clean environment built
from the container's `env` and the `PASSHAT_*` variables, in a new session (its own
process group, so it can be killed as a whole), stdin from /dev/null and stdout + stderr
into its transcript file. The working directories live in one scratch directory per run,
one per running slot, emptied after each attempt (creating and removing a directory per
attempt costs more than a short trial on some disks).

The command is the first container's `command` + `args` with Kubernetes' `$(VAR)`
expansion; the image is ignored. A bare command name is looked up on the trial's PATH, a
relative path (`./agent.sh`) is taken relative to the eval file's directory: locally that
directory plays the role of the image.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from typing import Any

from passhat.api.errors import SpecError

__all__ = [
    "CALLER_VARS",
    "MAX_ARG_STRLEN",
    "Scratch",
    "TranscriptError",
    "base_env",
    "container_command",
    "container_env",
    "exec_string_problem",
    "expand",
    "open_transcript",
    "spawn",
]

CALLER_VARS = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM")
CONTAINER = "spec.trial.template.spec.containers[0]"
# The v2 cgroup wrapper: join the cgroup whose cgroup.procs is $0, then become the trial.
WRAPPER = 'echo $$ > "$0" || exit 125; exec "$@"'

# Linux's limit on one argument or one NAME=value environment string, its NUL included
# (MAX_ARG_STRLEN: exec fails with E2BIG above it).
MAX_ARG_STRLEN = 32 * 4096

_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def base_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables every trial inherits from the caller: PATH, locale, TZ, TERM."""
    env = {name: environ[name] for name in CALLER_VARS if name in environ}
    env.update({name: value for name, value in environ.items() if name.startswith("LC_")})
    env.setdefault("PATH", os.defpath)
    return env


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' `$(VAR)` expansion: known variables replaced, `$$` is a literal `$`."""
    if "$" not in text:
        return text

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return "$"
        return env.get(name, match.group(0))

    return _VAR.sub(replace, text)


def exec_string_problem(text: str, *, prefix: str = "") -> str | None:
    """Why `prefix + text` cannot be an argument or environment string of exec, if it cannot."""
    if "\0" in text:
        return "must not contain a NUL character"
    size = len(prefix.encode()) + len(text.encode("utf-8", "surrogateescape")) + 1
    if size > MAX_ARG_STRLEN:
        return (
            f"is {size} bytes; Linux allows at most {MAX_ARG_STRLEN} bytes (128 KiB) for one "
            "argument or environment variable"
        )
    return None


def container_env(container: Mapping[str, Any], *, source: str | None) -> dict[str, str]:
    """The container's `env` as a dict; `valueFrom` / `envFrom` need a cluster (SpecError)."""
    if container.get("envFrom"):
        raise SpecError(
            "envFrom needs a cluster; passhat run supports env entries with a value",
            field=f"{CONTAINER}.envFrom",
            path=source,
        )
    env: dict[str, str] = {}
    # NB: the model has checked env's shape (`template_problems`): a list of objects whose
    # names are non-empty strings without '=' or NUL and whose values, if any, strings
    for index, entry in enumerate(container.get("env") or []):
        at = f"{CONTAINER}.env[{index}]"
        if "valueFrom" in entry:
            raise SpecError(
                "valueFrom needs a cluster; give a literal value for passhat run",
                field=f"{at}.valueFrom",
                path=source,
            )
        name, value = entry["name"], entry.get("value", "")
        if value is None:  # NB: `value: null` (the model lets it through)
            raise SpecError("must be a string", field=f"{at}.value", path=source)
        env[name] = expand(value, env)
        problem = exec_string_problem(env[name], prefix=name + "=")
        if problem is not None:
            raise SpecError(problem, field=f"{at}.value", path=source)
    return env


def container_command(
    container: Mapping[str, Any], *, path: str, eval_dir: str, source: str | None
) -> tuple[str, list[str]]:
    """(executable, argv) of the container: `command` + `args`, executable resolved.

    `path` is the trial's PATH. Raises SpecError (naming the field) when there is no
    command (an image's entrypoint does not exist locally) or it cannot be found.
    """
    command, args = container.get("command"), container.get("args") or []
    if not command:
        raise SpecError(
            "no command: passhat run ignores the image, so the container needs a command",
            field=f"{CONTAINER}.command",
            path=source,
        )
    for name, value in (("command", command), ("args", args)):
        if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
            raise SpecError("must be a list of strings", field=f"{CONTAINER}.{name}", path=source)
    argv = [str(v) for v in [*command, *args]]
    for index, arg in enumerate(argv):
        problem = exec_string_problem(arg)
        if problem is not None:
            at = f"command[{index}]" if index < len(command) else f"args[{index - len(command)}]"
            raise SpecError(problem, field=f"{CONTAINER}.{at}", path=source)
    program = argv[0]
    if "/" in program:
        executable = os.path.normpath(os.path.join(eval_dir, program))
        found = os.path.isfile(executable) and os.access(executable, os.X_OK)
    else:
        which = shutil.which(program, path=path)
        executable, found = which or program, which is not None
    if not found:
        raise SpecError(
            f'"{program}" is not an executable file'
            + ("" if "/" in program else " on the trial's PATH"),
            field=f"{CONTAINER}.command[0]",
            path=source,
        )
    return os.path.abspath(executable), argv


class Scratch:
    """The run's scratch directory: one working directory and result file per slot."""

    def __init__(self) -> None:
        self.root = tempfile.mkdtemp(prefix="passhat-")
        self._made: set[int] = set()

    def workdir(self, slot: int) -> str:
        """The (empty) working directory of `slot`."""
        path = self.root + f"/w{slot}"
        if slot not in self._made:
            os.mkdir(path, 0o700)
            self._made.add(slot)
        return path

    def result_path(self, slot: int) -> str:
        """Where the attempt in `slot` may write its result JSON."""
        return os.path.join(self.root, f"r{slot}.json")

    def reset(self, slot: int, *, result_left: bool = True) -> None:
        """Empty `slot`'s working directory and remove its result file.

        `result_left=False` says the caller has just found no result file (after the
        attempt's processes were killed), so there is none to remove.
        """
        path = self.root + f"/w{slot}"
        if result_left:
            result = self.result_path(slot)
            try:
                os.unlink(result)
            except FileNotFoundError:
                pass
            except OSError:
                # NB: a trial may have put a directory where its result file goes
                _remove_tree(result)
        try:
            if not os.listdir(path):
                return
        except FileNotFoundError:
            self._made.discard(slot)
            return
        except OSError:
            pass
        _remove_tree(path)
        self._made.discard(slot)

    def close(self) -> None:
        """Remove the scratch directory."""
        _remove_tree(self.root)


def _remove_tree(path: str) -> None:
    def unlock(function: Any, target: str, _: Any) -> None:
        # NB: a trial may have taken the write bit off its own directories
        with contextlib.suppress(OSError):
            os.chmod(os.path.dirname(target), 0o700)
            os.chmod(target, 0o700)
        with contextlib.suppress(OSError):
            if function is os.open:
                # NB: rmtree could not open a directory: retry it whole (os.open needs flags)
                shutil.rmtree(target, ignore_errors=True)
            else:
                function(target)

    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    shutil.rmtree(path, onerror=unlock)


def spawn(
    executable: str,
    argv: list[str],
    env: Mapping[str, str],
    *,
    cwd: str,
    out: int,
    stdin: int = subprocess.DEVNULL,
    wrapper_procs: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start one attempt in `cwd`, in a new session; its process.

    stdin is /dev/null (or the open fd `stdin`: a spawner keeps one /dev/null open for
    all its attempts), stdout and stderr go to the open file `out`. With `wrapper_procs`
    the attempt first joins the cgroup whose `cgroup.procs` that is. `subprocess.Popen`
    and not `os.posix_spawn`: both vfork, but Popen lets go of the GIL while the child
    execs (posix_spawn holds it), so spawns on several threads overlap, and it changes the
    child's working directory itself. The caller must keep the returned Popen until it
    has reaped the process (`wait()`): a Popen dropped early would be reaped by the
    subprocess module's own clean-up.
    """
    if wrapper_procs is not None:
        argv = ["/bin/sh", "-c", WRAPPER, wrapper_procs, executable, *argv[1:]]
        executable = "/bin/sh"
    return subprocess.Popen(
        argv,
        executable=executable,
        env=env,
        cwd=cwd,
        stdin=stdin,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


class TranscriptError(OSError):
    """The transcript file of an attempt could not be created."""


def open_transcript(path: str) -> int:
    """Create (truncate) the transcript file at `path`, and its directory; an open fd."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC
    try:
        try:
            return os.open(path, flags, 0o644)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):
                os.makedirs(os.path.dirname(path))
            return os.open(path, flags, 0o644)
    except OSError as err:
        raise TranscriptError(err.errno, err.strerror, path) from None
