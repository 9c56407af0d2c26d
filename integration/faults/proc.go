package faults

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/idemgate/idemgate/vendorsim"
)

// BuildWorker builds the worker process into dir and returns its path. With faults,
// the binary is built with -tags idemgate_faults (the kill seam is live); without, it
// is the production build the price is measured on.
func BuildWorker(ctx context.Context, dir string, faults bool) (string, error) {
	name := "workerproc"
	args := []string{"build", "-o"}
	if faults {
		name += "-faults"
	}
	out := dir + "/" + name
	args = append(args, out)
	if faults {
		args = append(args, "-tags", "idemgate_faults")
	}
	args = append(args, "github.com/idemgate/idemgate/integration/faults/workerproc")
	cmd := exec.CommandContext(ctx, "go", args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("idemgate/integration/faults: go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return out, nil
}

// Proc is one worker process.
type Proc struct {
	cmd    *exec.Cmd
	stderr lockedBuffer
	lines  chan string
	done   chan struct{}
	state  *os.ProcessState
	err    error
}

// WorkerSpec says how to start a worker process.
type WorkerSpec struct {
	Bin, HostPort, Namespace, Queue, Store string
	World                                  *vendorsim.World
	// KillAt names the faultpoint the process kills itself at ("" for none).
	KillAt string
	// Bare runs the worker without the interceptor.
	Bare bool
	// Sticky keeps the sticky cache (the default off makes a restarted worker take
	// the workflow at once instead of after the sticky timeout).
	Sticky bool
	// CPUProfile, when set, is where the process writes its CPU profile when stopped.
	CPUProfile string
	// CPUProfileWindows, when set, is a directory where the process writes one CPU
	// profile per window that Proc.Profile opens and closes (exclusive with CPUProfile).
	CPUProfileWindows string
	// CPUProfileHz is the profiles' sampling rate (0: runtime/pprof's 100 Hz).
	CPUProfileHz int
	// Durability is the store's durability ("claim" or "strict"; "" is the default, claim).
	Durability string
	// PaymentsLookup, when set, is the URL of the card processor's lookup by key
	// (vendorsim.Vendor.LookupHandler): the gate asks it about a ChargeCard whose
	// outcome is unknown (activities.ChargeLookupWitness).
	PaymentsLookup string
	// HoldUnknown is the gate's Options.HoldUnknown (0: refuse an unknown outcome for good).
	HoldUnknown time.Duration
	// Args are more flags, for a sibling worker binary that takes these and its own
	// (integration/soak/workerproc).
	Args []string
}

// StartWorker starts a worker process.
func StartWorker(s WorkerSpec) (*Proc, error) {
	w := s.World
	args := []string{"--temporal-address", s.HostPort, "--namespace", s.Namespace, "--task-queue", s.Queue,
		"--store", s.Store, "--gate=" + strconv.FormatBool(!s.Bare), "--sticky=" + strconv.FormatBool(s.Sticky),
		"--docs-url", w.Docs.URL, "--crm-url", w.CRM.URL, "--tickets-url", w.Tickets.URL,
		"--payments-url", w.Payments.URL, "--email-url", w.Email.URL, "--chat-url", w.Chat.URL}
	if s.CPUProfile != "" {
		args = append(args, "--cpuprofile", s.CPUProfile)
	}
	if s.CPUProfileWindows != "" {
		args = append(args, "--cpuprofile-windows", s.CPUProfileWindows)
	}
	if s.CPUProfileHz > 0 {
		args = append(args, "--cpuprofile-hz", strconv.Itoa(s.CPUProfileHz))
	}
	if s.Durability != "" {
		args = append(args, "--durability", s.Durability)
	}
	if s.PaymentsLookup != "" {
		args = append(args, "--payments-lookup-url", s.PaymentsLookup)
	}
	if s.HoldUnknown > 0 {
		args = append(args, "--hold-unknown", s.HoldUnknown.String())
	}
	args = append(args, s.Args...)
	p := &Proc{lines: make(chan string, 64), done: make(chan struct{})}
	p.cmd = exec.Command(s.Bin, args...)
	env := make([]string, 0, len(os.Environ())+1)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IDEMGATE_KILL_AT=") {
			env = append(env, kv)
		}
	}
	if s.KillAt != "" {
		env = append(env, "IDEMGATE_KILL_AT="+s.KillAt)
	}
	p.cmd.Env = env
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("idemgate/integration/faults: start %s: %w", s.Bin, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default: // nobody asked for it
			}
		}
		_, _ = io.Copy(io.Discard, out)
		p.err = p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.done)
	}()
	return p, nil
}

// Pid is the process ID.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Kill sends SIGKILL.
func (p *Proc) Kill() { _ = p.cmd.Process.Signal(syscall.SIGKILL) }

// Wait waits for the process to end.
func (p *Proc) Wait(ctx context.Context) (*os.ProcessState, error) {
	select {
	case <-p.done:
		return p.state, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("idemgate/integration/faults: worker process %d still running: %w", p.Pid(), ctx.Err())
	}
}

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// KilledBySIGKILL reports whether the process ended by SIGKILL.
func (p *Proc) KilledBySIGKILL() bool {
	if !p.Exited() || p.state == nil {
		return false
	}
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// Stderr is what the process wrote to stderr.
func (p *Proc) Stderr() string { return p.stderr.String() }

// Stop stops the process gracefully (SIGTERM), killing it after 10 seconds.
func (p *Proc) Stop() {
	if p.Exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Wait(ctx); err != nil {
		p.Kill()
		<-p.done
	}
}

// WaitReady waits for the worker's "ready" line.
func (p *Proc) WaitReady(ctx context.Context) error {
	for {
		select {
		case l := <-p.lines:
			if strings.HasPrefix(l, "ready") {
				return nil
			}
		case <-p.done:
			return fmt.Errorf("idemgate/integration/faults: worker process exited before it was ready: %v\n%s", p.err, p.Stderr())
		case <-ctx.Done():
			return fmt.Errorf("idemgate/integration/faults: worker process not ready: %w\n%s", ctx.Err(), p.Stderr())
		}
	}
}

// CPU returns the user+system CPU time the process has used so far (it answers
// SIGUSR1 with its getrusage).
func (p *Proc) CPU(ctx context.Context) (time.Duration, error) {
	u, err := p.Usage(ctx)
	return u.CPU, err
}

// Usage is what a worker process's getrusage says.
type Usage struct {
	// CPU is user plus system time.
	CPU time.Duration
	// Switches counts the context switches: voluntary (a thread blocked: a futex
	// sleep, a syscall that waited) plus involuntary (preempted). A worker process
	// older than the count says 0.
	Switches int64
}

// Usage returns the process's getrusage so far (it answers SIGUSR1 with it).
func (p *Proc) Usage(ctx context.Context) (Usage, error) {
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		return Usage{}, err
	}
	for {
		select {
		case l := <-p.lines:
			f := strings.Fields(l)
			if len(f) < 3 || f[0] != "rusage" {
				continue
			}
			var n [4]int64
			for i := 1; i < len(f) && i <= len(n); i++ {
				v, err := strconv.ParseInt(f[i], 10, 64)
				if err != nil {
					return Usage{}, fmt.Errorf("idemgate/integration/faults: rusage line %q: %w", l, err)
				}
				n[i-1] = v
			}
			return Usage{CPU: time.Duration(n[0]+n[1]) * time.Microsecond, Switches: n[2] + n[3]}, nil
		case <-p.done:
			return Usage{}, errors.New("idemgate/integration/faults: worker process exited")
		case <-ctx.Done():
			return Usage{}, ctx.Err()
		}
	}
}

// Profile opens a CPU profile window of a process started with
// WorkerSpec.CPUProfileWindows, or closes the open one and returns the file it
// wrote (it answers SIGUSR2 once the profile is started or written).
func (p *Proc) Profile(ctx context.Context) (file string, err error) {
	if err := p.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		return "", err
	}
	for {
		select {
		case l := <-p.lines:
			f := strings.Fields(l)
			if len(f) < 3 || f[0] != "profile" {
				continue
			}
			switch {
			case f[2] == "on":
				return "", nil
			case f[2] == "off" && len(f) == 4:
				return f[3], nil
			default:
				return "", fmt.Errorf("idemgate/integration/faults: worker process %d: %s", p.Pid(), l)
			}
		case <-p.done:
			return "", errors.New("idemgate/integration/faults: worker process exited")
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 {
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
