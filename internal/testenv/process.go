package testenv

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// BuildProvider builds cmd/provider into dir and returns the binary's path,
// for tests that run the provider as an OS process (to kill it, or to run two
// replicas).
func BuildProvider(dir string) (string, error) {
	bin := filepath.Join(dir, "provider")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/provider")
	cmd.Dir = RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.Wrapf(err, "cannot build cmd/provider: %s", out)
	}
	return bin, nil
}

// WriteKubeconfig writes a kubeconfig of an admin of this API server into dir
// and returns its path, for processes that read KUBECONFIG.
func (e *Env) WriteKubeconfig(dir string) (string, error) {
	b, err := e.Kubeconfig()
	if err != nil {
		return "", err
	}
	p := filepath.Join(dir, "kubeconfig")
	return p, errors.Wrap(os.WriteFile(p, b, 0o600), "cannot write kubeconfig")
}

// A Process is a program a test runs as an OS process, its output appended to
// a log file.
type Process struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// StartProcess runs bin with args, and env added to the test's environment,
// appending its output to the file log. The process dies with the test binary
// (on Linux), so a test that panics leaves nothing running.
func StartProcess(log, bin string, args []string, env ...string) (*Process, error) {
	f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, errors.Wrap(err, "cannot open log file")
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, errors.Wrapf(err, "cannot start %s", bin)
	}
	p := &Process{cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not exited.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// ExitErr is how the process ended; only meaningful once Done is closed.
func (p *Process) ExitErr() error { return p.err }

// Kill sends SIGKILL, as an OOM kill or a node loss would end it, and returns
// once it is gone.
func (p *Process) Kill() {
	if p == nil || !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop sends SIGTERM and, after a grace period, SIGKILL; it returns once the
// process is gone.
func (p *Process) Stop() {
	if p == nil || !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.Kill()
	}
}

// LogTail returns the last n lines of the process's log.
func (p *Process) LogTail(n int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(string(bytes.TrimRight(b, "\n")), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FreePort returns a loopback port nobody listens on right now.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, errors.Wrap(err, "cannot find a free port")
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}
