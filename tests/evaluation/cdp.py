"""A headless Chromium driven over the Chrome DevTools Protocol, with the standard library only
(a websocket client of ~60 lines): for tests/evaluation/test_review_browser.py.

``with Chromium(tmp_path) as browser``: starts ``chromium --headless=new`` on a port of its own
choosing (read from the profile's ``DevToolsActivePort``), ``browser.page`` is a session on its
page, ``browser.root`` on the browser itself; both keep the events they receive
(``events``)."""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import time
import urllib.request

FLAGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--no-default-browser-check", "--disable-extensions", "--window-size=1200,800",
         "--remote-debugging-port=0", "--remote-allow-origins=*")


class WebSocket:
    """A client websocket (RFC 6455) of text messages: no extensions, frames masked."""

    def __init__(self, url: str, timeout: float = 30):
        hostport, path = url[len("ws://"):].split("/", 1)
        host, port = hostport.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise ConnectionError(f"websocket handshake refused: {head[:200]!r}")

    def _recv(self) -> bytes:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the browser closed the websocket")
        return chunk

    def _read(self, n: int) -> bytes:
        while len(self.buf) < n:
            self.buf += self._recv()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def _frame(self, opcode: int, data: bytes) -> None:
        n = len(data)
        head = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else
                                         bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536
                                         else bytes([0x80 | 127]) + struct.pack(">Q", n))
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.sendall(head + mask + masked)

    def send(self, text: str) -> None:
        self._frame(0x1, text.encode("utf-8"))

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._read(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else b""
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            opcode = b0 & 0x0F
            if opcode == 0x8:
                raise ConnectionError("the browser closed the websocket")
            if opcode == 0x9:
                self._frame(0xA, payload)
                continue
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if b0 & 0x80:
                    return message.decode("utf-8")

    def close(self) -> None:
        self.sock.close()


class Session:
    """Commands (:meth:`call`) and events (:attr:`events`) of one DevTools target."""

    def __init__(self, url: str):
        self.ws = WebSocket(url)
        self.next_id = 0
        self.events = []

    def call(self, method: str, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_event(self, method: str, timeout: float = 30) -> dict:
        """The first event ``method`` not yet taken, waiting for it."""
        end = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self.events):
                if ev["method"] == method:
                    return self.events.pop(i)
            if time.monotonic() > end:
                raise TimeoutError(f"no {method} event in {timeout} s")
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)

    def load(self, url: str | None = None, timeout: float = 30) -> None:
        """Navigate to ``url`` (reload the page when it is None) and return once the new
        document has loaded: load events left from an earlier document are dropped first, and
        the document evaluated next is not the one marked before leaving it."""
        self.events = [e for e in self.events if e["method"] != "Page.loadEventFired"]
        self.evaluate("window.__cdpEarlier = true")
        if url is None:
            self.call("Page.reload")
        else:
            self.call("Page.navigate", url=url)
        self.wait_event("Page.loadEventFired", timeout)
        end = time.monotonic() + timeout
        while True:
            try:
                if self.evaluate("window.__cdpEarlier !== true && "
                                 "document.readyState === 'complete'"):
                    return
            except RuntimeError:  # evaluated while the documents changed: ask again
                pass
            if time.monotonic() > end:
                raise TimeoutError(f"no new document loaded in {timeout} s")
            time.sleep(0.05)

    def evaluate(self, expression: str):
        """The value of a JavaScript expression on the page (an exception is an error)."""
        res = self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                        awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def press(self, key: str) -> None:
        """One key pressed and released: a letter, or ArrowLeft/ArrowRight/Backspace."""
        codes = {"ArrowLeft": ("ArrowLeft", 37), "ArrowRight": ("ArrowRight", 39),
                 "Backspace": ("Backspace", 8)}
        if key in codes:
            code, vk = codes[key]
            down = {"key": key, "code": code, "windowsVirtualKeyCode": vk}
        else:
            down = {"key": key, "code": f"Key{key.upper()}", "text": key,
                    "windowsVirtualKeyCode": ord(key.upper())}
        self.call("Input.dispatchKeyEvent", type="keyDown", **down)
        self.call("Input.dispatchKeyEvent", type="keyUp",
                  **{k: v for k, v in down.items() if k != "text"})


class Chromium:
    """A headless Chromium of its own profile in ``folder``; stopped on leaving the block."""

    def __init__(self, folder, executable: str = "chromium"):
        self.folder = folder
        self.executable = shutil.which(executable) or executable

    def __enter__(self):
        profile = os.path.join(self.folder, "profile")
        self.log = open(os.path.join(self.folder, "chromium.log"), "wb")
        self.proc = subprocess.Popen([self.executable, *FLAGS, f"--user-data-dir={profile}",
                                      "about:blank"], stdout=self.log, stderr=self.log)
        active = os.path.join(profile, "DevToolsActivePort")
        end = time.monotonic() + 60
        while not os.path.isfile(active) or len(open(active).read().split()) < 2:
            if self.proc.poll() is not None or time.monotonic() > end:
                self.__exit__(None, None, None)
                raise RuntimeError(f"chromium did not start (log: {self.log.name})")
            time.sleep(0.1)
        port, path = open(active).read().split()[:2]
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{base}/json/list", timeout=30) as f:
            page = next(t for t in json.load(f) if t["type"] == "page")
        self.page = Session(page["webSocketDebuggerUrl"])
        self.root = Session(f"ws://127.0.0.1:{port}{path}")
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()
        return False
