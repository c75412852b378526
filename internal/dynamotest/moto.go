package dynamotest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	motoReadyTimeout = 30 * time.Second
	motoStopTimeout  = 5 * time.Second
)

// motoServer is a moto_server child process listening on loopback.
type motoServer struct {
	endpoint string
	pid      int
	out      *tailBuffer
	exited   chan struct{} // closed once the process has exited and been reaped
	waitErr  error         // valid once exited is closed
}

// startMoto starts moto_server on a free loopback port and waits until it
// answers. The port is picked by binding :0 and releasing it, so another
// process may take it in between; a server that exits before it is ready is
// therefore retried on a new port (twice). env is added to the server's
// environment.
func startMoto(path string, env ...string) (*motoServer, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var port int
		if port, err = freePort(); err != nil {
			return nil, err
		}
		var s *motoServer
		if s, err = launchMoto(path, port, env); err != nil {
			return nil, err
		}
		if err = s.waitReady(motoReadyTimeout); err == nil {
			return s, nil
		}
		s.stop()
		err = fmt.Errorf("%w\n--- %s output (tail) ---\n%s", err, motoCommand, s.out.tail(30))
		select {
		case <-s.exited: // died early, perhaps the port was taken: retry
		default:
			return nil, err
		}
	}
	return nil, err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launchMoto starts the process. The kernel delivers Pdeathsig when the OS
// thread that forked the child exits (not when the process does), so the
// child is forked from a goroutine locked to its thread, and that goroutine
// stays on the thread, blocked in Wait, for as long as the child runs. It
// never unlocks: when it returns, the runtime ends the thread, which by then
// has no child left to signal. If the test binary dies in any way, the thread
// dies with it and the kernel SIGKILLs moto. Setpgid puts moto in its own
// process group, so stop can signal anything it spawned, and a terminal's
// Ctrl-C reaches only the test binary (whose death then kills moto).
func launchMoto(path string, port int, env []string) (*motoServer, error) {
	s := &motoServer{
		endpoint: "http://127.0.0.1:" + strconv.Itoa(port),
		out:      &tailBuffer{max: 64 << 10},
		exited:   make(chan struct{}),
	}
	cmd := motoCmd(path, port)
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout = s.out
	cmd.Stderr = s.out
	cmd.WaitDelay = time.Second // don't wait for pipes held open by stray grandchildren
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked, see above
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	s.pid = cmd.Process.Pid
	return s, nil
}

// waitReady polls GET / until the server answers, the process exits, or the
// timeout passes.
func (s *motoServer) waitReady(timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		resp, err := hc.Get(s.endpoint + "/")
		if err == nil {
			resp.Body.Close()
			select {
			case <-s.exited:
				// Someone else answered on our port.
			default:
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s on %s not ready after %v (last error: %v)", motoCommand, s.endpoint, timeout, err)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("%s on %s exited before it was ready: %v", motoCommand, s.endpoint, s.waitErr)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop terminates the process group (SIGTERM, then SIGKILL after
// motoStopTimeout) and waits for the process to be reaped.
func (s *motoServer) stop() {
	select {
	case <-s.exited:
		return // already reaped: its pid (and group id) may belong to someone else now
	default:
	}
	_ = syscall.Kill(-s.pid, syscall.SIGTERM)
	select {
	case <-s.exited:
		return
	case <-time.After(motoStopTimeout):
	}
	_ = syscall.Kill(-s.pid, syscall.SIGKILL)
	select {
	case <-s.exited:
	case <-time.After(motoStopTimeout):
	}
}

// tailBuffer is an io.Writer that keeps roughly the last max bytes written.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 2*b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

// tail returns the last n lines written.
func (b *tailBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	data := bytes.TrimRight(b.buf, "\n")
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' {
			if n--; n == 0 {
				data = data[i+1:]
				break
			}
		}
	}
	if len(data) == 0 {
		return "(no output)"
	}
	return strings.ToValidUTF8(string(data), "?")
}

// serializedMoto runs moto's WSGI app like moto_server does, but handles one
// request at a time. moto's DynamoDB backend is not thread-safe: with
// moto_server's threaded server, two concurrent conditional puts of one key
// can both pass their condition (seen here as two winners of one lock under
// load), where DynamoDB applies writes to an item atomically. Python's GIL
// means the threads never ran in parallel anyway, so serializing costs
// little.
//
// It also backs up a transaction's items rather than its tables: moto's
// TransactWriteItems deep-copies every table it writes to before it starts
// (to roll back on a cancel), which was most of the server's time in the
// tests (a table of a few hundred items: 0.4 s a transaction). Here the
// items the transaction names are copied, and put back (with the table's
// stream records) when it fails; moto's own rollback then restores each
// table to itself. moto 5's transact_write_items writes only those items.
//
// More paths of moto 5 are made fast, each answering exactly as
// moto does (TestFastMotoAnswersAsMoto compares the two on one script of
// requests; DYNAMOTEST_MOTO_PLAIN=1 in the server's environment turns them
// off). With them one Query-heavy test (TestRunContinuesAfterTheClockMoved)
// went from 98 s to 23 s, and four runs of TestDynamoRepositoryConformance
// from 202 s to 134 s:
//   - a Query of a table reads its one partition, where moto sorts and
//     walks every item of the table for each Query;
//   - a table's items are ordered (to page a Scan or an index Query) by a
//     key of plain values, where moto compares its typed wrappers, which
//     rebuild each value per comparison;
//   - a condition expression is parsed once per expression, names and
//     values (the parsed tree only reads the item it is given);
//   - an attribute value is written to JSON as it is (binary data
//     base64-encoded), where moto's generic serializer walks its model;
//   - the lists moto rebuilds for every request (its backends, by listing
//     its package directory; a handler's methods) are kept.
//
// A patch whose moto internals are missing (another moto version) is left
// out with a line on the server's output; the server still answers.
//
// The HTTP server in front of moto's WSGI app is a small one of its own
// (_Front: HTTP/1.1, keep-alive, Content-Length or chunked bodies), where
// moto_server uses werkzeug's development server, whose request parsing
// (the standard library's email parser for headers) and environ building
// took a third of the server's time per request (a GetItem: 2.9 ms of CPU
// with werkzeug's, 1.9 ms with this one). The app is the same, so the
// answers are: TestFastMotoAnswersAsMoto compares this server with moto's
// app behind werkzeug (DYNAMOTEST_MOTO_PLAIN=1 serves that).
const serializedMoto = `
import copy, os, signal, sys, threading
from werkzeug.serving import run_simple
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
import moto.dynamodb.models as ddb_models
from moto.dynamodb.models.table import Table

class _TablesNotCopied:
    def __getattr__(self, name):
        return getattr(copy, name)
    def deepcopy(self, x, memo=None):
        return x if isinstance(x, Table) else copy.deepcopy(x, memo)

_transact = ddb_models.DynamoDBBackend.transact_write_items
def _transact_items_backed_up(self, transact_items):
    saved = []
    for entry in transact_items:
        for op in entry.values():
            table = self.tables.get(op.get("TableName")) if isinstance(op, dict) else None
            if table is None:
                continue
            attrs = op.get("Key") or op.get("Item") or {}
            if table.hash_key_attr not in attrs or (table.range_key_attr and table.range_key_attr not in attrs):
                continue
            key = {table.hash_key_attr: attrs[table.hash_key_attr]}
            if table.range_key_attr:
                key[table.range_key_attr] = attrs[table.range_key_attr]
            h, r = self.get_keys_value(table, key)
            stream = len(table.stream_shard.items) if table.stream_shard is not None else 0
            saved.append((table, h, r, copy.deepcopy(table.get_item(h, r)), stream))
    ddb_models.copy = _TablesNotCopied()
    try:
        return _transact(self, transact_items)
    except BaseException:
        for table, h, r, item, stream in reversed(saved):
            if table.range_key_attr:
                if item is None:
                    table.items[h].pop(r, None)
                else:
                    table.items[h][r] = item
            elif item is None:
                table.items.pop(h, None)
            else:
                table.items[h] = item
            if table.stream_shard is not None:
                del table.stream_shard.items[stream:]
        raise
    finally:
        ddb_models.copy = copy
ddb_models.DynamoDBBackend.transact_write_items = _transact_items_backed_up


import base64, inspect, json, logging
logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request

def _fast_paths():
    from moto.dynamodb.comparisons import ConditionExpressionParser
    from moto.core.serialize import BaseJSONSerializer

    def items_unsorted(self):
        if self.range_key_attr:
            return [item for part in self.items.values() for item in part.values()]
        return list(self.items.values())

    def all_items(self):
        items = items_unsorted(self)
        if self.range_key_attr:
            items.sort(key=lambda x: (x.hash_key.cast_value, x.range_key.cast_value))
        else:
            items.sort(key=lambda x: x.hash_key.cast_value)
        return items

    sort_attrs = Table._generate_attr_to_sort_by
    def sorted_items(self, hash_key_attrs, range_key_attrs, items):
        attrs = sort_attrs(self, hash_key_attrs, range_key_attrs)
        items.sort(key=lambda x: tuple([x.attrs[k].cast_value for k in attrs]))
        return items

    query = Table.query
    query_sig = inspect.signature(query)
    def query_one_partition(self, *args, **kwargs):
        bound = query_sig.bind(self, *args, **kwargs)
        if bound.arguments.get("index_name"):
            self.all_items = lambda: items_unsorted(self)  # it sorts its matches itself
        else:
            hash_key = bound.arguments.get("hash_key")
            part = self.items.get(hash_key) if hash_key is not None else None
            if part is None:
                found = []
            elif self.range_key_attr:
                found = list(part.values())
            else:
                found = [part]
            self.all_items = lambda: found
        try:
            return query(self, *args, **kwargs)
        finally:
            del self.all_items

    parse = ConditionExpressionParser.parse
    parsed = {}
    def parse_once(self):
        try:
            key = json.dumps([self.condition_expression, self.expression_attribute_names,
                              self.expression_attribute_values], sort_keys=True)
        except (TypeError, ValueError):
            return parse(self)
        hit = parsed.get(key)
        if hit is None:
            op = parse(self)  # an invalid expression raises, every time
            hit = (op, list(self.expr_attr_names_found), list(self.expr_attr_values_found))
            if len(parsed) > 20000:
                parsed.clear()
            parsed[key] = hit
        self.expr_attr_names_found = list(hit[1])  # checked for unused names
        self.expr_attr_values_found = list(hit[2])
        return hit[0]

    def b64(x):
        if isinstance(x, str):
            x = x.encode("utf-8")
        return base64.b64encode(x).strip().decode("utf-8")
    def av(v):
        out = {}
        for k, x in v.items():
            if x is None:
                continue
            if k == "M":
                x = {mk: av(mv) for mk, mv in x.items()}
            elif k == "L":
                x = [av(e) for e in x]
            elif k == "B":
                x = b64(x)
            elif k == "BS":
                x = [b64(e) for e in x]
            out[k] = x
        return out
    structure = BaseJSONSerializer._serialize_type_structure
    def av_structure(self, serialized, value, shape, key):
        if key and shape.name == "AttributeValue" and isinstance(value, dict):
            serialized[self.get_serialized_name(shape, key)] = av(value)
            return
        structure(self, serialized, value, shape, key)

    # Per request, moto lists its own package directory to find the
    # backend, and lists the handler class's methods: both the same for the
    # server's life.
    import functools
    from moto import backends
    import moto.core.responses as core_responses
    modules = tuple(backends.list_of_moto_modules())
    method_names = functools.lru_cache(maxsize=None)(core_responses.method_names_from_class)

    backends.list_of_moto_modules = lambda: modules
    core_responses.method_names_from_class = method_names
    Table.all_items = all_items
    Table.sorted_items = sorted_items
    Table.query = query_one_partition
    ConditionExpressionParser.parse = parse_once
    BaseJSONSerializer._serialize_type_structure = av_structure

if os.environ.get("DYNAMOTEST_MOTO_PLAIN") != "1":
    try:
        _fast_paths()
    except Exception as e:  # another moto: serve it as it is
        sys.stderr.write("dynamotest: moto's fast paths left out: %r\n" % (e,))

host, port = sys.argv[1], int(sys.argv[2])
os.environ.setdefault("MOTO_PORT", str(port))
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
app = DomainDispatcherApplication(create_backend_app)
lock = threading.Lock()
def serialized(environ, start_response):
    with lock:
        body = app(environ, start_response)
        try:
            return [b"".join(body)]
        finally:
            close = getattr(body, "close", None)
            if close:
                close()

import io, socketserver
from urllib.parse import unquote
class _Front(socketserver.StreamRequestHandler):
    rbufsize = 1 << 16
    disable_nagle_algorithm = True
    def handle(self):
        rfile, sock = self.rfile, self.connection
        peer = self.client_address
        while True:
            line = rfile.readline(1 << 16)
            if not line:
                return
            if line in (b"\r\n", b"\n"):
                continue
            parts = line.decode("latin-1").rstrip("\r\n").split(" ")
            if len(parts) != 3:
                return
            method, target, version = parts
            environ = {}
            length, chunked, expect = 0, False, False
            keep = version == "HTTP/1.1"
            while True:
                h = rfile.readline(1 << 16)
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                k, v = k.strip(), v.strip()
                lk = k.lower()
                if lk == "content-length":
                    length = int(v)
                elif lk == "transfer-encoding":
                    chunked = v.lower() == "chunked"
                elif lk == "connection":
                    keep = v.lower() != "close" if version == "HTTP/1.1" else v.lower() == "keep-alive"
                elif lk == "expect":
                    expect = v.lower() == "100-continue"
                key = "HTTP_" + k.upper().replace("-", "_")
                if key in ("HTTP_CONTENT_TYPE", "HTTP_CONTENT_LENGTH"):
                    environ[key[5:]] = v
                elif key in environ:
                    environ[key] += "," + v
                else:
                    environ[key] = v
            if expect:
                sock.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
            if chunked:
                body = []
                while True:
                    size = int(rfile.readline().split(b";")[0], 16)
                    if size == 0:
                        while rfile.readline() not in (b"\r\n", b"\n", b""):
                            pass
                        break
                    body.append(rfile.read(size))
                    rfile.readline()
                body = b"".join(body)
                environ["CONTENT_LENGTH"] = str(len(body))
            else:
                body = rfile.read(length) if length else b""
            path, _, query = target.partition("?")
            environ.update({
                "REQUEST_METHOD": method, "SCRIPT_NAME": "", "PATH_INFO": unquote(path, "latin-1"),
                "QUERY_STRING": query, "RAW_URI": target, "REQUEST_URI": target,
                "SERVER_NAME": host, "SERVER_PORT": str(port), "SERVER_PROTOCOL": version,
                "REMOTE_ADDR": peer[0], "REMOTE_PORT": peer[1],
                "wsgi.version": (1, 0), "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body),
                "wsgi.errors": sys.stderr, "wsgi.multithread": True, "wsgi.multiprocess": False,
                "wsgi.run_once": False,
            })
            answer, written = [], []
            def start_response(status, headers, exc_info=None):
                answer[:] = [status, headers]
                return written.append  # WSGI's write callable
            try:
                data = b"".join(serialized(environ, start_response))
                data = b"".join(written) + data
                status, headers = answer
            except Exception:
                import traceback
                data = traceback.format_exc().encode("utf-8", "replace")
                status, headers = "500 INTERNAL SERVER ERROR", [("Content-Type", "text/plain; charset=utf-8")]
            out = ["HTTP/1.1 " + status]
            for k, v in headers:
                if k.lower() not in ("content-length", "connection"):
                    out.append(k + ": " + v)
            out.append("Content-Length: %d" % len(data))
            out.append("Connection: " + ("keep-alive" if keep else "close"))
            sock.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1") + data)
            if not keep:
                return

class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
if os.environ.get("DYNAMOTEST_MOTO_PLAIN") == "1":
    run_simple(host, port, serialized, threaded=True)
else:
    _Server((host, port), _Front).serve_forever()
`

// motoCmd returns the command that serves moto on port: the serialized
// launcher above when a Python interpreter with moto is found (the one in
// moto_server's shebang, or python3 on PATH), else moto_server itself.
func motoCmd(motoPath string, port int) *exec.Cmd {
	for _, py := range pythonCandidates(motoPath) {
		if exec.Command(py, "-c", "import moto.moto_server.werkzeug_app, werkzeug.serving").Run() == nil {
			return exec.Command(py, "-c", serializedMoto, "127.0.0.1", strconv.Itoa(port))
		}
	}
	return exec.Command(motoPath, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
}

// pythonCandidates lists interpreters that may have moto installed.
func pythonCandidates(motoPath string) []string {
	var out []string
	if f, err := os.Open(motoPath); err == nil {
		line, _ := bufio.NewReader(f).ReadString('\n')
		f.Close()
		if fields := strings.Fields(strings.TrimPrefix(line, "#!")); strings.HasPrefix(line, "#!") && len(fields) > 0 &&
			strings.Contains(fields[len(fields)-1], "python") {
			out = append(out, fields[len(fields)-1])
		}
	}
	if p, err := exec.LookPath("python3"); err == nil {
		out = append(out, p)
	}
	return out
}

// MotoCommand returns the command that serves moto on 127.0.0.1:port one
// request at a time, as the tests start it (see serializedMoto), for a
// local server outside the tests (internal/dynamotest/localmoto). An
// error says moto_server is not on PATH.
func MotoCommand(port int) (*exec.Cmd, error) {
	path, err := exec.LookPath(motoCommand)
	if err != nil {
		return nil, fmt.Errorf("%s: %w; %s", motoCommand, err, howTo)
	}
	return motoCmd(path, port), nil
}
