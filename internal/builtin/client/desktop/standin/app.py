#!/usr/bin/python3
"""MST stand-in desktop chat app.

A small GTK 3 chat window that behaves, as far as MST's desktop automation
can tell, like Claude Desktop's chat: it reads the managed settings, connects
to the MCP servers they name over streamable HTTP, talks to a model provider
in the Anthropic Messages wire format, shows the chat in accessible widgets
and keeps its own record of each chat. Prompt switches (#standin:hang,
#standin:crash, #standin:stray) and environment switches
(MST_STANDIN_STRAY_AT_START, MST_STANDIN_SLOW_START) reproduce the failures
MST must handle. See README.md beside this file.

Python's standard library only, besides Debian's python3-gi with GTK 3,
which is imported only when the window is made (so --version and the MCP and
provider parts run without it).
"""

import argparse
import datetime
import http.client
import json
import os
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
import uuid

NAME = "mst-standin"
VERSION = "1.0.0"
PROTOCOL_VERSION = "2025-06-18"
DEFAULT_SETTINGS = "/etc/claude-desktop/managed-settings.json"
DEFAULT_MODEL = "claude-sonnet-4-5"
DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
MAX_TOKENS = 4096
MAX_TURNS = 25
WINDOW_TITLE = "MST Stand-in Chat"
STRAY_TITLE = "Update available"
STRAY_TEXT = "A new version is ready."

SWITCH_HANG = "#standin:hang"
SWITCH_CRASH = "#standin:crash"
SWITCH_STRAY = "#standin:stray"

# Seconds to wait for an MCP server or the provider.
MCP_TIMEOUT = 30
TOOL_TIMEOUT = 300
PROVIDER_TIMEOUT = 600


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def one_line(text, limit=300):
    """Text made fit for a status line or a log field: one line, bounded."""
    text = " ".join(str(text).split())
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


def describe(err):
    """A short reason for a network or OS error."""
    if isinstance(err, urllib.error.HTTPError):
        return "HTTP %d" % err.code
    if isinstance(err, urllib.error.URLError):
        err = err.reason
    if isinstance(err, socket.timeout) or isinstance(err, TimeoutError):
        return "timed out"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return one_line(err) or type(err).__name__


def config_dir():
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, NAME)


def is_loopback(host):
    host = (host or "").strip("[]").lower()
    return host == "localhost" or host.startswith("127.") or host == "::1"


def opener_for(url):
    """An opener that goes straight to loopback addresses (never through a
    proxy from the environment) and honours proxies elsewhere."""
    if is_loopback(urllib.parse.urlsplit(url).hostname):
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))
    return urllib.request.build_opener()


def identify(widget, name, ident, describe=False):
    """Sets widget's accessible name, and a stable id that readers can match
    however the name changes: the AT-SPI AccessibleId property (ATK 2.34 and
    later), the GTK widget name and, with describe, the accessible
    description."""
    widget.set_name(ident)
    acc = widget.get_accessible()
    acc.set_name(name)
    if hasattr(acc, "set_accessible_id"):
        acc.set_accessible_id(ident)
    if describe:
        acc.set_description(ident)


class Log:
    """app.log: one line per event. Secrets registered with secret() are
    replaced wherever they would appear."""

    def __init__(self, path):
        self.path = path
        self.lock = threading.Lock()
        self.secrets = set()
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError:
            pass

    def secret(self, value):
        if not isinstance(value, str):
            return
        for v in (value, value.split(" ", 1)[-1]):
            v = v.strip()
            if len(v) >= 4:
                self.secrets.add(v)

    def redact(self, text):
        for v in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(v, "[redacted]")
        return text

    def __call__(self, event, **fields):
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        parts = [stamp, event]
        for k, v in fields.items():
            v = one_line(v, 500)
            if v == "" or any(c in v for c in ' "='):
                v = json.dumps(v)
            parts.append("%s=%s" % (k, v))
        line = self.redact(" ".join(parts)) + "\n"
        with self.lock:
            try:
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(line)
            except OSError:
                pass


# ---------------------------------------------------------------- settings


class SettingsError(Exception):
    pass


class ServerConfig:
    def __init__(self, name, raw):
        self.name = name
        self.raw = raw if isinstance(raw, dict) else {}
        self.problem = None if isinstance(raw, dict) else "not a JSON object"
        kind = self.raw.get("type")
        if kind is None:
            kind = "http" if "url" in self.raw else ("stdio" if "command" in self.raw else "")
        self.type = kind if isinstance(kind, str) else ""
        self.url = self.raw.get("url") if isinstance(self.raw.get("url"), str) else ""
        headers = self.raw.get("headers") or {}
        self.headers = {}
        if isinstance(headers, dict):
            for k, v in headers.items():
                if isinstance(k, str) and isinstance(v, str):
                    self.headers[k] = v
        elif self.problem is None:
            self.problem = "headers is not an object"
        if self.problem is None:
            if self.type not in ("http", "streamable-http", "streamableHttp"):
                self.problem = 'unsupported type "%s" (the stand-in speaks streamable HTTP only)' % (self.type or "?")
            elif not self.url:
                self.problem = "no url"
            elif urllib.parse.urlsplit(self.url).scheme not in ("http", "https"):
                self.problem = "url is not http(s)"


class Settings:
    def __init__(self, model, servers):
        self.model = model
        self.servers = servers


def load_settings(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise SettingsError("%s: %s" % (path, e.strerror or e))
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise SettingsError("%s: invalid JSON: %s" % (path, e))
    if not isinstance(data, dict):
        raise SettingsError("%s: not a JSON object" % path)
    servers = data.get("mcpServers", {})
    if servers is None:
        servers = {}
    if not isinstance(servers, dict):
        raise SettingsError("%s: mcpServers is not an object" % path)
    model = data.get("model") or DEFAULT_MODEL
    if not isinstance(model, str):
        raise SettingsError("%s: model is not a string" % path)
    return Settings(model, [ServerConfig(n, c) for n, c in servers.items()])


# ---------------------------------------------------------------- MCP client


class MCPError(Exception):
    pass


class HTTPStatus(Exception):
    def __init__(self, code, body, session):
        Exception.__init__(self, "HTTP %d%s" % (code, (": " + body) if body else ""))
        self.code = code
        self.session = session


class MCPClient:
    """One MCP server over streamable HTTP (protocol 2025-06-18)."""

    def __init__(self, name, url, headers, log):
        self.name = name
        self.url = url
        self.headers = dict(headers)
        self.log = log
        self.opener = opener_for(url)
        self.lock = threading.Lock()
        self.init_lock = threading.Lock()
        self.last_id = 0
        self.session_id = None
        self.protocol_version = None
        self.server_info = {}

    def _next_id(self):
        with self.lock:
            self.last_id += 1
            return self.last_id

    def _send(self, msg, timeout, session, version):
        """POSTs one JSON-RPC message. Returns (status, headers, reply), reply
        being the response to msg's id (None for a notification or a
        response)."""
        headers = dict(self.headers)
        headers["Content-Type"] = "application/json"
        headers["Accept"] = "application/json, text/event-stream"
        if session:
            headers["Mcp-Session-Id"] = session
        if version:
            headers["MCP-Protocol-Version"] = version
        req = urllib.request.Request(self.url, data=json.dumps(msg).encode("utf-8"), headers=headers, method="POST")
        try:
            resp = self.opener.open(req, timeout=timeout)
        except urllib.error.HTTPError as e:
            try:
                body = one_line(e.read(400).decode("utf-8", "replace"), 160)
            except Exception:
                body = ""
            e.close()
            raise HTTPStatus(e.code, body, session)
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
            raise MCPError(describe(e))
        with resp:
            want = msg.get("id") if "method" in msg else None
            if want is None:
                return resp.status, resp.headers, None
            ctype = (resp.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            try:
                if ctype == "text/event-stream":
                    reply = self._read_sse(resp, want)
                elif ctype == "application/json" or ctype.endswith("+json"):
                    reply = self._pick(json.loads(resp.read().decode("utf-8")), want)
                else:
                    raise MCPError("unexpected response (HTTP %d, Content-Type %r)" % (resp.status, ctype))
            except (OSError, http.client.HTTPException) as e:
                raise MCPError("reading the response: %s" % describe(e))
            except ValueError as e:
                raise MCPError("invalid JSON in the response: %s" % one_line(e, 120))
            if reply is None:
                raise MCPError("no response to request %s (HTTP %d)" % (want, resp.status))
            return resp.status, resp.headers, reply

    def _pick(self, data, want):
        for m in data if isinstance(data, list) else [data]:
            if not isinstance(m, dict):
                continue
            if "method" in m:
                self._server_message(m)
            elif m.get("id") == want and ("result" in m or "error" in m):
                return m
        return None

    def _read_sse(self, resp, want):
        data = []
        while True:
            line = resp.readline()
            if not line:
                end = True
                line = b""
            else:
                end = False
            line = line.decode("utf-8", "replace").rstrip("\r\n")
            if line == "":
                if data:
                    text = "\n".join(data)
                    data = []
                    try:
                        m = json.loads(text)
                    except ValueError:
                        m = None
                    if m is not None:
                        reply = self._pick(m, want)
                        if reply is not None:
                            return reply
                if end:
                    return None
                continue
            if line.startswith(":"):
                continue
            field, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if field == "data":
                data.append(value)

    def _server_message(self, m):
        """A request or notification the server sent on a response stream."""
        method = m.get("method")
        if "id" not in m:
            if method == "notifications/tools/list_changed":
                self.log("mcp tools changed", server=self.name)
            return
        if method == "ping":
            reply = {"jsonrpc": "2.0", "id": m["id"], "result": {}}
        else:
            reply = {"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "method not found"}}
        try:
            self._send(reply, MCP_TIMEOUT, self.session_id, self.protocol_version)
        except (MCPError, HTTPStatus):
            pass

    def initialize(self, stale=None):
        """Opens a session. With stale, only if the session is still that
        one (another thread may have opened a new one already)."""
        with self.init_lock:
            if stale is not None and self.session_id != stale:
                return
            self.session_id = None
            self.protocol_version = None
            msg = {
                "jsonrpc": "2.0",
                "id": self._next_id(),
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": NAME, "version": VERSION},
                },
            }
            try:
                _, headers, reply = self._send(msg, MCP_TIMEOUT, None, None)
            except HTTPStatus as e:
                raise MCPError("initialize: %s" % e)
            if "error" in reply:
                raise MCPError("initialize: %s" % rpc_error(reply["error"]))
            result = reply.get("result") or {}
            session = headers.get("Mcp-Session-Id")
            version = result.get("protocolVersion")
            self.server_info = result.get("serverInfo") or {}
            note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            try:
                status, _, _ = self._send(note, MCP_TIMEOUT, session, version)
            except HTTPStatus as e:
                raise MCPError("notifications/initialized: %s" % e)
            if status != 202:
                self.log("mcp unexpected status", server=self.name, method="notifications/initialized", status=status)
            self.session_id = session or None
            self.protocol_version = version if isinstance(version, str) else PROTOCOL_VERSION

    def request(self, method, params, timeout=MCP_TIMEOUT):
        for attempt in (1, 2):
            session, version = self.session_id, self.protocol_version
            msg = {"jsonrpc": "2.0", "id": self._next_id(), "method": method, "params": params}
            try:
                _, _, reply = self._send(msg, timeout, session, version)
            except HTTPStatus as e:
                if e.code == 404 and e.session and attempt == 1:
                    # The session expired: a new one, then the same request.
                    self.log("mcp session expired", server=self.name, method=method)
                    self.initialize(stale=e.session)
                    continue
                raise MCPError("%s: %s" % (method, e))
            if "error" in reply:
                raise MCPError("%s: %s" % (method, rpc_error(reply["error"])))
            result = reply.get("result")
            return result if isinstance(result, dict) else {}

    def list_tools(self):
        tools, cursor = [], None
        for _ in range(1000):
            result = self.request("tools/list", {"cursor": cursor} if cursor else {})
            for t in result.get("tools") or []:
                if isinstance(t, dict) and isinstance(t.get("name"), str):
                    tools.append(t)
            cursor = result.get("nextCursor")
            if not cursor:
                break
        return tools

    def call_tool(self, name, arguments):
        return self.request("tools/call", {"name": name, "arguments": arguments}, timeout=TOOL_TIMEOUT)


def rpc_error(err):
    if isinstance(err, dict):
        return "%s (code %s)" % (one_line(err.get("message", "error"), 200), err.get("code"))
    return one_line(err, 200)


def tool_result_text(result):
    """The text contents of an MCP tools/call result, joined."""
    texts = []
    for c in result.get("content") or []:
        if isinstance(c, dict) and c.get("type") == "text" and isinstance(c.get("text"), str):
            texts.append(c["text"])
    if not texts and result.get("structuredContent") is not None:
        texts.append(json.dumps(result["structuredContent"]))
    return "\n".join(texts)


class Server:
    """One configured server and what is known of it."""

    def __init__(self, config, log):
        self.config = config
        self.name = config.name
        self.client = None
        self.tools = []
        self.error = config.problem
        self.connecting = config.problem is None
        if config.problem is None:
            self.client = MCPClient(config.name, config.url, config.headers, log)

    def label(self):
        if self.connecting:
            return "%s (connecting)" % self.name
        if self.error:
            return "%s (failed: %s)" % (self.name, one_line(self.error, 200))
        return "%s (%d tools)" % (self.name, len(self.tools))


# ---------------------------------------------------------------- provider


class ProviderError(Exception):
    def __init__(self, message, status=None):
        Exception.__init__(self, message)
        self.status = status


class Provider:
    """The Anthropic Messages API, non-streaming."""

    def __init__(self, log):
        self.base = (os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        self.key = os.environ.get("ANTHROPIC_API_KEY") or ""
        log.secret(self.key)
        self.opener = opener_for(self.base)

    def origin(self):
        u = urllib.parse.urlsplit(self.base)
        return "%s://%s" % (u.scheme, u.hostname or "") + (":%d" % u.port if u.port else "")

    def messages(self, model, messages, tools):
        body = {"model": model, "max_tokens": MAX_TOKENS, "messages": messages}
        if tools:
            body["tools"] = tools
        headers = {"anthropic-version": ANTHROPIC_VERSION, "content-type": "application/json"}
        if self.key:
            headers["x-api-key"] = self.key
        req = urllib.request.Request(self.base + "/v1/messages", data=json.dumps(body).encode("utf-8"), headers=headers, method="POST")
        try:
            with self.opener.open(req, timeout=PROVIDER_TIMEOUT) as resp:
                status = resp.status
                raw = resp.read()
        except urllib.error.HTTPError as e:
            try:
                raw = e.read(4000)
            except Exception:
                raw = b""
            e.close()
            detail = ""
            try:
                err = json.loads(raw.decode("utf-8")).get("error") or {}
                detail = err.get("message") or err.get("type") or ""
            except Exception:
                detail = raw.decode("utf-8", "replace")
            raise ProviderError("HTTP %d%s" % (e.code, (": " + one_line(detail, 160)) if detail else ""), e.code)
        except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as e:
            raise ProviderError(describe(e))
        try:
            data = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise ProviderError("invalid JSON in the response", status)
        if not isinstance(data, dict) or data.get("type") == "error":
            err = data.get("error") if isinstance(data, dict) else None
            raise ProviderError("error response: %s" % one_line((err or {}).get("message", data), 160), status)
        return status, data


# ---------------------------------------------------------------- the record


class Chat:
    """One chat: its messages, in the Anthropic format, and its record."""

    def __init__(self, model):
        self.id = str(uuid.uuid4())
        self.model = model
        self.started = now_rfc3339()
        self.messages = []
        self.usage = {"input_tokens": 0, "output_tokens": 0}
        self.cancelled = threading.Event()
        self.lock = threading.Lock()

    def add_user_text(self, text):
        block = {"type": "text", "text": text}
        last = self.messages[-1] if self.messages else None
        if last is not None and last["role"] == "user":
            # An earlier prompt ended without an answer (an error, the turn
            # limit): the API wants the roles to alternate, so this prompt
            # joins that user turn.
            if isinstance(last["content"], str):
                last["content"] = [{"type": "text", "text": last["content"]}]
            last["content"].append(block)
        else:
            self.messages.append({"role": "user", "content": [block]})

    def save(self):
        directory = os.path.join(config_dir(), "conversations")
        with self.lock:
            record = {
                "id": self.id,
                "model": self.model,
                "started": self.started,
                "updated": now_rfc3339(),
                "messages": self.messages,
                "usage": self.usage,
            }
            data = json.dumps(record, indent=1, ensure_ascii=False).encode("utf-8")
            os.makedirs(directory, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix="." + self.id + ".", suffix=".tmp", dir=directory)
            try:
                os.fchmod(fd, 0o644)  # as a file made with umask 022, not mkstemp's 0600
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, os.path.join(directory, self.id + ".json"))
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise


# ---------------------------------------------------------------- the app


class App:
    def __init__(self, Gtk, GLib, settings_path, log):
        self.Gtk = Gtk
        self.GLib = GLib
        self.settings_path = settings_path
        self.log = log
        self.provider = Provider(log)
        self.model = DEFAULT_MODEL
        self.servers = []
        self.servers_lock = threading.Lock()
        self.settings_error = None
        self.started = False  # startup (settings, servers) is over
        self.busy = False  # a prompt is being answered, or hangs
        self.strays = []
        self.chat = Chat(self.model)
        self.status_text = None
        self.servers_text = None
        self._build()

    # -- widgets

    def _build(self):
        Gtk = self.Gtk
        win = Gtk.Window(title=WINDOW_TITLE)
        win.set_default_size(800, 600)
        win.connect("destroy", self._on_destroy)
        self.window = win

        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=6)
        box.set_border_width(8)
        win.add(box)

        self.servers_label = Gtk.Label(label="")
        self.servers_label.set_xalign(0.0)
        self.servers_label.set_line_wrap(True)
        identify(self.servers_label, "servers", "servers", describe=True)
        box.pack_start(self.servers_label, False, False, 0)

        self.view = Gtk.TextView()
        self.view.set_editable(False)
        self.view.set_cursor_visible(False)
        self.view.set_wrap_mode(Gtk.WrapMode.WORD_CHAR)
        identify(self.view, "conversation", "conversation")
        self.buffer = self.view.get_buffer()
        self.end_mark = self.buffer.create_mark("end", self.buffer.get_end_iter(), False)
        scroll = Gtk.ScrolledWindow()
        scroll.set_policy(Gtk.PolicyType.AUTOMATIC, Gtk.PolicyType.AUTOMATIC)
        scroll.add(self.view)
        box.pack_start(scroll, True, True, 0)

        row = Gtk.Box(orientation=Gtk.Orientation.HORIZONTAL, spacing=6)
        self.entry = Gtk.Entry()
        identify(self.entry, "prompt", "prompt")
        self.entry.connect("activate", self._on_send)
        row.pack_start(self.entry, True, True, 0)
        self.send_button = Gtk.Button(label="Send")
        identify(self.send_button, "send", "send")
        self.send_button.connect("clicked", self._on_send)
        row.pack_start(self.send_button, False, False, 0)
        self.new_button = Gtk.Button(label="New chat")
        identify(self.new_button, "new chat", "new chat")
        self.new_button.connect("clicked", self._on_new_chat)
        row.pack_start(self.new_button, False, False, 0)
        box.pack_start(row, False, False, 0)

        self.status_label = Gtk.Label(label="")
        self.status_label.set_xalign(0.0)
        identify(self.status_label, "status", "status", describe=True)
        box.pack_start(self.status_label, False, False, 0)

        self.set_status("starting")
        self.set_servers_text("servers: (reading settings)")
        win.show_all()
        self.entry.grab_focus()

    def set_status(self, text):
        text = one_line(text, 400)
        if text == self.status_text:
            return
        self.status_text = text
        self.status_label.set_text(text)
        self.status_label.get_accessible().set_name(text)
        self.log("status", text=text)

    def set_servers_text(self, text):
        if text == self.servers_text:
            return
        self.servers_text = text
        self.servers_label.set_text(text)
        self.servers_label.get_accessible().set_name(text)

    def append_line(self, line):
        end = self.buffer.get_end_iter()
        self.buffer.insert(end, ("\n" if self.buffer.get_char_count() > 0 else "") + line)
        self.view.scroll_mark_onscreen(self.end_mark)

    def idle(self, fn, *args):
        """Runs fn(*args) on the main loop."""

        def run():
            fn(*args)
            return False

        self.GLib.idle_add(run)

    def for_chat(self, chat, fn, *args):
        """Runs fn(*args) on the main loop if chat is still the current one."""

        def run():
            if chat is self.chat and not chat.cancelled.is_set():
                fn(*args)

        self.idle(run)

    # -- startup

    def start(self):
        if os.environ.get("MST_STANDIN_STRAY_AT_START") == "1":
            self.log("switch", name="stray at start")
            self.idle(self.open_stray)
        threading.Thread(target=self._startup, name="startup", daemon=True).start()

    def _startup(self):
        try:
            slow = os.environ.get("MST_STANDIN_SLOW_START")
            if slow:
                try:
                    delay = float(slow)
                except ValueError:
                    delay = 0
                if delay > 0:
                    self.log("switch", name="slow start", seconds=delay)
                    time.sleep(delay)
            try:
                settings = load_settings(self.settings_path)
            except SettingsError as e:
                self.log("settings failed", why=str(e))
                self.idle(self._startup_done, None, "settings: %s" % e)
                return
            servers = [Server(c, self.log) for c in settings.servers]
            for s in servers:
                for v in s.config.headers.values():
                    self.log.secret(v)
            self.log("settings read", path=self.settings_path, servers=len(servers), model=settings.model)
            for s in servers:
                if s.error:
                    self.log("server failed", server=s.name, why=s.error)
            with self.servers_lock:
                self.servers = servers
            self.idle(self._set_model, settings.model)
            self._update_servers_label()
            threads = [threading.Thread(target=self._connect, args=(s,), daemon=True) for s in servers if s.connecting]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            self.idle(self._startup_done, servers, None)
        except Exception as e:
            self.log("internal error", where="startup", why="%s: %s" % (type(e).__name__, e))
            self.idle(self._startup_done, None, "startup: %s" % e)

    def _set_model(self, model):
        self.model = model
        if not self.chat.messages:
            self.chat.model = model

    def _connect(self, server):
        """Opens server's session and lists its tools (in a worker)."""
        try:
            server.client.initialize()
            server.tools = server.client.list_tools()
            server.error = None
            self.log("server connected", server=server.name, tools=len(server.tools))
        except MCPError as e:
            server.error = str(e)
            self.log("server failed", server=server.name, why=str(e))
        except Exception as e:
            server.error = "%s: %s" % (type(e).__name__, e)
            self.log("server failed", server=server.name, why=server.error)
        server.connecting = False
        self._update_servers_label()

    def _update_servers_label(self):
        # The text is made on the main loop, from the servers as they are
        # then: made here, an older text could be shown after a newer one.
        self.idle(self._show_servers)

    def _show_servers(self):
        if self.settings_error:
            self.set_servers_text("servers: none")
            return
        with self.servers_lock:
            servers = list(self.servers)
        self.set_servers_text("servers: " + (", ".join(s.label() for s in servers) if servers else "none"))

    def _startup_done(self, servers, error):
        self.settings_error = error
        self.started = True
        self._show_servers()
        if not self.busy:
            self.set_status(self.base_status())

    def base_status(self):
        """The status when nothing is asked: ready, or the startup's error."""
        if self.settings_error:
            return "error: " + self.settings_error
        with self.servers_lock:
            failed = [s for s in self.servers if s.error and not s.connecting]
        if failed:
            more = " (and %d more)" % (len(failed) - 1) if len(failed) > 1 else ""
            return "error: server %s: %s%s" % (failed[0].name, failed[0].error, more)
        return "ready"

    # -- the chat

    def _on_send(self, *_):
        if self.strays:
            self.log("send ignored", why="a stray window is open")
            return
        text = self.entry.get_text()
        if not text.strip() or self.busy or not self.started:
            return
        self.entry.set_text("")
        chat = self.chat
        self.busy = True
        self.log("prompt received", chat=chat.id, length=len(text))
        self.append_line("You: " + text)
        self.set_status("working")
        if SWITCH_CRASH in text:
            self.log("switch", name="crash", chat=chat.id)
            self._save_quietly(chat, text)
            # A moment for the bus to carry the "You:" line, then die.
            self.GLib.timeout_add(300, self._crash)
            return
        if SWITCH_HANG in text:
            self.log("switch", name="hang", chat=chat.id)
            self._save_quietly(chat, text)
            return
        stray = SWITCH_STRAY in text
        threading.Thread(target=self._answer, args=(chat, text, stray), name="answer", daemon=True).start()

    def _save_quietly(self, chat, text):
        try:
            chat.add_user_text(text)
            chat.save()
        except Exception as e:
            self.log("record failed", chat=chat.id, why=str(e))

    def _crash(self):
        self.log("exit", code=3, why="crash switch")
        os._exit(3)

    def _on_new_chat(self, *_):
        old = self.chat
        old.cancelled.set()
        self.chat = Chat(self.model)
        self.buffer.set_text("")
        was_busy = self.busy
        self.busy = False
        self.log("new chat", chat=self.chat.id, cancelled=str(was_busy).lower())
        if self.started:
            self.set_status(self.base_status())

    def _refresh_tools(self):
        """Lists every server's tools again (a server that failed before is
        connected again); a server that fails now keeps no tools."""
        with self.servers_lock:
            servers = list(self.servers)
        for s in servers:
            if s.client is None or s.connecting:
                continue
            try:
                if s.client.session_id is None and s.error:
                    s.client.initialize()
                s.tools = s.client.list_tools()
                if s.error:
                    self.log("server connected", server=s.name, tools=len(s.tools))
                s.error = None
            except MCPError as e:
                if not s.error:
                    self.log("server failed", server=s.name, why=str(e))
                s.error = str(e)
                s.tools = []
        self._update_servers_label()
        return servers

    def _catalog(self, servers):
        """The tools offered to the model, and what each name maps back to."""
        tools, mapping = [], {}
        for s in servers:
            if s.error:
                continue
            for t in s.tools:
                name = t["name"]
                if name in mapping:
                    name = "%s__%s" % (s.name, t["name"])
                    if name in mapping:
                        continue
                mapping[name] = (s, t["name"])
                schema = t.get("inputSchema")
                if not isinstance(schema, dict):
                    schema = {"type": "object"}
                entry = {"name": name, "input_schema": schema}
                if isinstance(t.get("description"), str):
                    entry["description"] = t["description"]
                tools.append(entry)
        return tools, mapping

    def _answer(self, chat, text, stray):
        """Answers one prompt (in a worker)."""
        try:
            chat.add_user_text(text)
            chat.save()
            servers = self._refresh_tools()
            tools, mapping = self._catalog(servers)
            for turn in range(1, MAX_TURNS + 1):
                if chat.cancelled.is_set():
                    return
                self.log("provider request", chat=chat.id, turn=turn, messages=len(chat.messages), tools=len(tools))
                try:
                    status, resp = self.provider.messages(chat.model, chat.messages, tools)
                except ProviderError as e:
                    self.log("provider response", chat=chat.id, turn=turn, status=e.status or "none", why=str(e))
                    self.for_chat(chat, self._finish, None, "provider: %s" % e, False)
                    return
                usage = resp.get("usage") or {}
                with chat.lock:
                    for k in ("input_tokens", "output_tokens"):
                        if isinstance(usage.get(k), int):
                            chat.usage[k] += usage[k]
                content = [b for b in resp.get("content") or [] if isinstance(b, dict)]
                stop = resp.get("stop_reason")
                self.log("provider response", chat=chat.id, turn=turn, status=status, stop_reason=stop)
                chat.messages.append({"role": "assistant", "content": content})
                chat.save()
                uses = [b for b in content if b.get("type") == "tool_use"]
                if stop != "tool_use" or not uses:
                    answer = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
                    self.for_chat(chat, self._finish, answer, None, stray)
                    return
                results = {"role": "user", "content": []}
                chat.messages.append(results)
                if turn == MAX_TURNS:
                    # No turn is left to send results in; the chat still
                    # needs them, to go on with the next prompt.
                    for use in uses:
                        results["content"].append({"type": "tool_result", "tool_use_id": use.get("id", ""), "content": "not called: the model used all its %d turns" % MAX_TURNS, "is_error": True})
                    chat.save()
                    break
                for use in uses:
                    if chat.cancelled.is_set():
                        return
                    result = self._call(chat, use, mapping)
                    results["content"].append(result)
                    chat.save()
            self.log("turn limit", chat=chat.id, turns=MAX_TURNS)
            self.for_chat(chat, self._finish, None, "the model used %d turns without an answer" % MAX_TURNS, False)
        except Exception as e:
            self.log("internal error", where="answer", why="%s: %s" % (type(e).__name__, e))
            traceback.print_exc()
            self.for_chat(chat, self._finish, None, "internal: %s" % e, False)

    def _call(self, chat, use, mapping):
        """Calls the tool a tool_use block names; returns its tool_result."""
        name = use.get("name") if isinstance(use.get("name"), str) else "?"
        args = use.get("input") if isinstance(use.get("input"), dict) else {}
        ok, text = False, ""
        target = mapping.get(name)
        if target is None:
            text = "unknown tool: %s" % name
        else:
            server, tool = target
            try:
                result = server.client.call_tool(tool, args)
                text = tool_result_text(result)
                ok = not result.get("isError")
            except MCPError as e:
                text = "tool call failed: %s" % e
            except Exception as e:
                text = "tool call failed: %s: %s" % (type(e).__name__, e)
        self.log("tool call", chat=chat.id, name=name, result="ok" if ok else "error")
        self.for_chat(chat, self.append_line, ("Tool: " if ok else "Tool error: ") + name)
        block = {"type": "tool_result", "tool_use_id": use.get("id", "")}
        if text:
            block["content"] = text
        if not ok:
            block["is_error"] = True
        return block

    def _finish(self, answer, error, stray):
        self.busy = False
        if answer is not None:
            self.append_line("Assistant: " + answer)
            self.set_status("done")
            if stray:
                self.log("switch", name="stray", chat=self.chat.id)
                self.open_stray()
        else:
            self.set_status("error: " + error)

    # -- the stray window

    def open_stray(self):
        Gtk = self.Gtk
        w = Gtk.Window(title=STRAY_TITLE)
        w.set_transient_for(self.window)
        w.set_modal(True)
        w.set_default_size(320, 120)
        box = Gtk.Box(orientation=Gtk.Orientation.VERTICAL, spacing=8)
        box.set_border_width(12)
        label = Gtk.Label(label=STRAY_TEXT)
        identify(label, STRAY_TEXT, "stray text")
        box.pack_start(label, True, True, 0)
        later = Gtk.Button(label="Later")
        identify(later, "later", "later")
        later.connect("clicked", lambda *_: w.destroy())
        box.pack_start(later, False, False, 0)
        w.add(box)
        w.connect("destroy", self._on_stray_closed)
        self.strays.append(w)
        w.show_all()
        w.present()
        later.grab_focus()
        self.log("stray window", state="open")

    def _on_stray_closed(self, w):
        if w in self.strays:
            self.strays.remove(w)
            self.log("stray window", state="closed")

    # -- the end

    def _on_destroy(self, *_):
        self.log("exit", code=0, why="window closed")
        self.Gtk.main_quit()

    def on_term(self, *_):
        self.log("exit", code=0, why="SIGTERM")
        self.Gtk.main_quit()
        return False


def parse_args(argv):
    p = argparse.ArgumentParser(prog="app.py", description="MST stand-in desktop chat app")
    p.add_argument("--settings", help="managed-settings JSON (default: $MST_STANDIN_SETTINGS, else %s)" % DEFAULT_SETTINGS)
    p.add_argument("--version", action="store_true", help="print the version and exit")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.version:
        print("%s %s" % (NAME, VERSION))
        return 0
    settings_path = args.settings or os.environ.get("MST_STANDIN_SETTINGS") or DEFAULT_SETTINGS
    log = Log(os.path.join(config_dir(), "app.log"))
    log("start", version=VERSION, pid=os.getpid(), settings=settings_path)
    try:
        import gi

        gi.require_version("Gtk", "3.0")
        from gi.repository import GLib, Gtk
    except (ImportError, ValueError) as e:
        log("exit", code=1, why="GTK 3: %s" % e)
        print("app.py: GTK 3 for Python is missing (Debian: python3-gi gir1.2-gtk-3.0): %s" % e, file=sys.stderr)
        return 1
    ok, _ = Gtk.init_check(sys.argv)
    if not ok:
        log("exit", code=1, why="cannot open the display")
        print("app.py: cannot open the display (DISPLAY=%s)" % os.environ.get("DISPLAY", ""), file=sys.stderr)
        return 1
    app = App(Gtk, GLib, settings_path, log)
    log("provider", origin=app.provider.origin())
    GLib.unix_signal_add(GLib.PRIORITY_HIGH, signal.SIGTERM, app.on_term)
    app.start()
    Gtk.main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Worker threads may be inside a network call: leave without them.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
