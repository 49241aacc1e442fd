package bridge

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"time"
)

// child is a stdio server's process, started in a process group of its
// own (on unix) so that stopping it also ends what it started: npx and uvx
// run the real server as a grandchild, which would otherwise outlive every
// restart. Its stdin and stdout carry the MCP session; its stderr goes to
// the bridge's log, a line a record, within [logRate].
type child struct {
	cmd    *exec.Cmd
	stdin  *os.File // write end
	stdout *os.File // read end
	stderr *os.File // read end
	grace  time.Duration

	exited     chan struct{} // closed when the process has exited and been waited for
	stderrDone chan struct{} // closed when the stderr reader has returned
	stopOnce   sync.Once
}

// defaultTerminate is how long a child has, after its stdin closes, to
// exit, and then after SIGTERM, before SIGKILL: go-sdk's default.
const defaultTerminate = 5 * time.Second

// startChild starts the server's command with the child's environment
// (childEnv) in a process group of its own.
func (b *Bridge) startChild() (*child, error) {
	cmd := exec.Command(b.srv.Command, b.srv.Args...)
	cmd.Env = childEnv(runtime.GOOS, os.Environ(), b.srv.Env)
	ownGroup(cmd)
	var ends [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	for i := 0; i < len(ends); i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(ends[:i])
			return nil, err
		}
		ends[i], ends[i+1] = r, w
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ends[0], ends[3], ends[5]
	err := cmd.Start()
	closeAll([]*os.File{ends[0], ends[3], ends[5]}) // the child's ends: it holds them now
	if err != nil {
		closeAll([]*os.File{ends[1], ends[2], ends[4]})
		return nil, err
	}
	grace := b.opts.TerminateDuration
	if grace <= 0 {
		grace = defaultTerminate
	}
	c := &child{cmd: cmd, stdin: ends[1], stdout: ends[2], stderr: ends[4], grace: grace,
		exited: make(chan struct{}), stderrDone: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // no copying goroutines: the pipes are files
		close(c.exited)
	}()
	go func() {
		defer close(c.stderrDone)
		logLines(c.stderr, b.log, newLogLimiter(b.log, b.srv.Name+"'s stderr"))
	}()
	return c, nil
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}

// pid is the child's process id, and its process group's.
func (c *child) pid() int { return c.cmd.Process.Pid }

// Read reads the server's messages (stdout).
func (c *child) Read(p []byte) (int, error) { return c.stdout.Read(p) }

// Write writes to the server (stdin).
func (c *child) Write(p []byte) (int, error) { return c.stdin.Write(p) }

// Close stops the child as the MCP spec says (close its stdin, wait, then
// SIGTERM, wait, then SIGKILL), then ends the rest of its process group
// the same way, and returns once the process is gone and its stderr read.
// Safe to call more than once.
func (c *child) Close() error {
	c.stopOnce.Do(c.stop)
	return nil
}

func (c *child) stop() {
	c.stdin.Close()
	if !c.waitExit(c.grace) {
		_ = terminateGroup(c.cmd.Process)
		if !c.waitExit(c.grace) {
			_ = killGroup(c.cmd.Process)
			c.waitExit(c.grace)
		}
	}
	// The child has exited; what it started may still run.
	if groupAlive(c.cmd.Process) {
		_ = terminateGroup(c.cmd.Process)
		deadline := time.Now().Add(c.grace)
		for groupAlive(c.cmd.Process) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond) // poll interval, bounded by the grace
		}
		_ = killGroup(c.cmd.Process)
	}
	// A process that left the group may hold the pipes: stop reading them.
	c.stdout.Close()
	select {
	case <-c.stderrDone:
	case <-time.After(c.grace):
		c.stderr.Close()
		<-c.stderrDone
	}
	c.stderr.Close()
}

// kill ends the child and its group at once (a child that stopped
// answering).
func (c *child) kill() { _ = killGroup(c.cmd.Process) }

// waitExit waits up to d for the process to exit.
func (c *child) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.exited:
		return true
	case <-t.C:
		return false
	}
}

var _ io.ReadWriteCloser = (*child)(nil)

// maxStderrLine is the longest stderr line logged as one record; a longer
// one is logged in pieces.
const maxStderrLine = 4096

// logLines logs each line of r (a child's stderr), in time linear in its
// size, within lim, until r ends; then reports what lim dropped.
func logLines(r io.Reader, log *slog.Logger, lim *logLimiter) {
	defer lim.close()
	br := bufio.NewReaderSize(r, maxStderrLine)
	for {
		line, err := br.ReadSlice('\n')
		if line = bytes.TrimRight(line, "\r\n"); len(line) > 0 && lim.allow() {
			log.Info("bridge: server stderr", "line", string(line))
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}
