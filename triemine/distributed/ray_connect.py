"""Connecting to Ray for ``--ray`` (the pool is :mod:`triemine.distributed.ray_backend`).

Addresses: ``local`` starts a private single-node cluster on 127.0.0.1 (CPUs = workers x
threads, no dashboard; usage statistics are off for every address); ``auto`` joins the cluster
this machine belongs to (``ray start --head`` / ``RAY_ADDRESS``); anything else (``HOST:PORT``,
``ray://HOST:PORT``) is passed to ``ray.init``.  When this process already has Ray initialised,
that session is used.

Token authentication (a cluster started by ``ray start`` uses it when a token exists on the
head): the driver asks the cluster's GCS first.  When it refuses a client without a token and
``RAY_AUTH_MODE`` is unset, the job turns token authentication on for itself with the token Ray
finds (``RAY_AUTH_TOKEN``, the file ``RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``).  No
token, a refused token or ``RAY_AUTH_MODE=disabled`` against such a cluster, nothing listening,
something else listening: each stops within :data:`PROBE_TIMEOUT_S` + :data:`GCS_TIMEOUT_S`
with one line (:class:`RayUnavailable`, exit 2) saying what to set.
"""
from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
from typing import Optional, Tuple

from triemine.errors import TrieMineError

EXTRA = "triemine[ray]"

log = logging.getLogger(__name__)

# how long to wait for a Ray address to accept a connection: Ray itself retries for minutes
PROBE_TIMEOUT_S = 10.0
# how long to wait for the GCS behind an open port to answer (Ray itself waits 40 s or more)
GCS_TIMEOUT_S = 8.0

TOKEN_HELP = ("set RAY_AUTH_TOKEN to the cluster's token or RAY_AUTH_TOKEN_PATH to a file holding "
              "it (default ~/.ray/auth_token; 'ray get-auth-token' on the head prints it)")


class RayUnavailable(TrieMineError):
    pass


def import_ray():
    """``ray``, or a clear error naming the extra that installs it."""
    try:
        import ray  # noqa: F401
    except ImportError as exc:
        raise RayUnavailable(f"--ray needs the Ray package, which is not installed ({exc}); "
                             f"install the optional extra: pip install -e '.[ray]' (or "
                             f"pip install '{EXTRA}')") from None
    return ray


def connect(address: str, num_cpus: int):
    """Initialise Ray for ``address`` (see the module docstring) unless it already is.

    Raises :class:`RayUnavailable` (one line) when the cluster cannot be reached or refuses
    this client's authentication."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # never phone home
    if address == "local":
        # a private single-node cluster: every Ray process on the loopback address (read by ray
        # when it is imported; otherwise Ray binds the machine's own IP)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    ray = import_ray()
    if ray.is_initialized():
        return ray
    gcs = _auto_address() if address == "auto" else address
    if gcs is not None and address != "local":
        probe(address if gcs == address else f"{address} ({gcs})", gcs)
        if not gcs.startswith("ray://"):  # Ray Client's server is no GCS
            check_gcs(address, gcs)
    kwargs = dict(include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        if address == "local":
            ray.init(address="local", num_cpus=num_cpus, **kwargs)
        else:
            ray.init(address=address, **kwargs)
    except (ConnectionError, RuntimeError, ValueError, ray.exceptions.RayError) as exc:
        hint = ("; start one with 'ray start --head' or set RAY_ADDRESS"
                if address == "auto" and gcs is None else "")
        raise RayUnavailable(f"--ray {address}: cannot connect: {first_line(exc)}{hint}") from None
    return ray


def _auto_address() -> Optional[str]:
    """The address ``auto`` stands for (``RAY_ADDRESS``, else the latest ``ray start`` on this
    machine), or None when Ray finds none (or its lookup is not there)."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
        return canonicalize_bootstrap_address("auto")
    except Exception:  # noqa: BLE001 - Ray's own ray.init("auto") reports it then
        return None


def split_address(address: str) -> Tuple[str, int]:
    """``(host, port)`` of ``HOST:PORT``, ``[IPv6]:PORT`` or ``ray://HOST:PORT``."""
    rest = address.split("://", 1)[1] if "://" in address else address
    host, sep, port = rest.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise RayUnavailable(f"--ray {address}: not a Ray address (HOST:PORT, ray://HOST:PORT, "
                             "auto or local)")
    return host, int(port)


def probe(address: str, target: Optional[str] = None, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Fail fast, with one clear line, when nothing accepts connections at a Ray ``address``
    (``target``: the address to try, when ``address`` names it otherwise): ``ray.init`` would
    otherwise wait for minutes with only its own warnings."""
    host, port = split_address(target or address)
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        why = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc))
        raise RayUnavailable(f"--ray {address}: no Ray cluster reachable there ({why}); start "
                             "one with 'ray start --head', or use --ray local") from None


def _gcs_answer(gcs: str, timeout: float):
    """What the GCS at ``gcs`` answers a client of this process's authentication settings:
    None (it accepted), the exception it raised, or ``TimeoutError`` when it did not answer in
    ``timeout`` s.  Ray's own warnings (stderr of its C++ core) are silenced meanwhile."""
    from ray._raylet import GcsClient

    result: list = []

    def ask():
        try:
            GcsClient(address=gcs)
            result.append(None)
        except Exception as exc:  # noqa: BLE001 - handed to the caller
            result.append(exc)

    thread = threading.Thread(target=ask, daemon=True)  # a GCS that never answers: left behind
    with _stderr_silenced():
        thread.start()
        thread.join(timeout)
    return result[0] if result else TimeoutError()


@contextlib.contextmanager
def _stderr_silenced():
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to silence
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _token_found() -> bool:
    from ray._raylet import AuthenticationTokenLoader
    return bool(AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True))


def _token_source() -> str:
    if os.environ.get("RAY_AUTH_TOKEN"):
        return "RAY_AUTH_TOKEN"
    if os.environ.get("RAY_AUTH_TOKEN_PATH"):
        return f"RAY_AUTH_TOKEN_PATH={os.environ['RAY_AUTH_TOKEN_PATH']}"
    return "~/.ray/auth_token"


def _enable_token_auth() -> None:
    """Token authentication for this process (what Ray itself does for ``auto``)."""
    from ray._raylet import AuthenticationTokenLoader, Config
    os.environ["RAY_AUTH_MODE"] = "token"
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def check_gcs(address: str, gcs: str, timeout: float = GCS_TIMEOUT_S) -> None:
    """Ask the GCS at ``gcs`` (the address ``--ray address`` stands for) for its cluster id
    with this process's authentication settings: turn token authentication on when the cluster
    needs it, ``RAY_AUTH_MODE`` is unset and a token is found; otherwise raise
    :class:`RayUnavailable` with one line that says what to set.  Skipped (Ray's own errors
    then) when this Ray has no token authentication."""
    where = f"--ray {address}" + (f" ({gcs})" if gcs != address else "")
    mode = os.environ.get("RAY_AUTH_MODE", "").strip().lower()
    try:
        from ray.exceptions import AuthenticationError
        if mode == "token" and not _token_found():  # Ray's core would abort the process
            raise RayUnavailable(f"{where}: RAY_AUTH_MODE=token and no token was found: "
                                 f"{TOKEN_HELP}")
        answer = _gcs_answer(gcs, timeout)
    except ImportError:
        return
    if isinstance(answer, AuthenticationError) and not mode:
        if not _token_found():
            raise RayUnavailable(f"{where}: the cluster requires token authentication and no "
                                 f"token was found: {TOKEN_HELP}")
        _enable_token_auth()
        answer = _gcs_answer(gcs, timeout)
    if answer is None:
        return
    if isinstance(answer, AuthenticationError):
        if mode not in ("", "token"):
            raise RayUnavailable(f"{where}: the cluster requires token authentication but "
                                 f"RAY_AUTH_MODE={os.environ['RAY_AUTH_MODE']}: unset it or set "
                                 f"RAY_AUTH_MODE=token, and {TOKEN_HELP}")
        raise RayUnavailable(f"{where}: the cluster refused the authentication token from "
                             f"{_token_source()} (not the token it was started with): "
                             f"{TOKEN_HELP}")
    if isinstance(answer, TimeoutError):
        raise RayUnavailable(f"{where}: no Ray cluster answered there within {timeout:g} s "
                             "(is it the port of 'ray start --head', default 6379?)")
    raise RayUnavailable(f"{where}: cannot connect: {first_line(answer)}")


def first_line(exc) -> str:
    text = ANSI_ESCAPE.sub("", str(exc)).strip().splitlines()
    return text[0] if text else ""


ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")
