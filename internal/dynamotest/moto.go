package dynamotest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
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
// therefore retried on a new port (twice).
func startMoto(path string) (*motoServer, error) {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		var port int
		if port, err = freePort(); err != nil {
			return nil, err
		}
		var s *motoServer
		if s, err = launchMoto(path, port); err != nil {
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
func launchMoto(path string, port int) (*motoServer, error) {
	s := &motoServer{
		endpoint: "http://127.0.0.1:" + strconv.Itoa(port),
		out:      &tailBuffer{max: 64 << 10},
		exited:   make(chan struct{}),
	}
	cmd := exec.Command(path, "-H", "127.0.0.1", "-p", strconv.Itoa(port))
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
