//go:build linux

package consume_test

import (
	"bufio"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"unsafe"
)

// awakeEnv turns the test binary into one CPU's spinner (see keepAwake):
// its value is the CPU.
const awakeEnv = "PACEGATE_TEST_AWAKE_CPU"

// schedIdle is Linux's SCHED_IDLE policy (linux/sched.h): a thread the
// kernel runs only when nothing else on its CPU is runnable, and preempts
// at once when something is.
const schedIdle = 5

// keepAwake starts one spinner per CPU, the test binary itself pinned to
// it at SCHED_IDLE, and returns their stop. A spinner takes no CPU time
// from anything else, but its CPU never goes idle: BenchmarkQueueHop's
// "-awake" runs time the hop on CPUs that did not halt in the 1 ms since
// the last one. On a VM whose guest halts at once when idle (this one's
// kernel runs cpuidle-haltpoll with guest_halt_poll_ns=0) the way back
// from a halt is what sets the hop's p99; see bench/findings/overhead.md.
// Each spinner dies with the benchmark's process, however it ends.
func keepAwake(b *testing.B) (stop func()) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var spinners []*exec.Cmd
	stop = func() {
		for _, c := range spinners {
			c.Process.Kill()
			c.Wait()
		}
	}
	for _, cpu := range allowedCPUs(b) {
		c := exec.Command(exe, "-test.run", "^$")
		c.Env = append(os.Environ(), awakeEnv+"="+strconv.Itoa(cpu))
		c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		c.Stderr = os.Stderr // a spinner that fails says why
		out, err := c.StdoutPipe()
		if err == nil {
			err = c.Start()
		}
		if err != nil {
			stop()
			b.Fatal(err)
		}
		spinners = append(spinners, c)
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil { // it spins
			stop()
			b.Fatalf("spinner on CPU %d: %v", cpu, err)
		}
	}
	return stop
}

// cpuMask is a CPU set as the kernel's sched_{get,set}affinity take it,
// for up to 1,024 CPUs.
type cpuMask [16]uint64

// allowedCPUs is the CPUs this process may run on: not always 0 to
// NumCPU-1 (a container's cpuset may be 2-3).
func allowedCPUs(b *testing.B) []int {
	var mask cpuMask
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_GETAFFINITY, 0, unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask))); e != 0 {
		b.Fatal(e)
	}
	var cpus []int
	for cpu := range len(mask) * 64 {
		if mask[cpu/64]&(1<<(cpu%64)) != 0 {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}

// spinIfAsked makes this process the spinner keepAwake asked for, if it
// is one: it never returns then.
func spinIfAsked() {
	v, ok := os.LookupEnv(awakeEnv)
	if !ok {
		return
	}
	cpu, err := strconv.Atoi(v)
	if err != nil {
		panic(err)
	}
	runtime.LockOSThread() // the policy and the pinning are this thread's
	var mask cpuMask
	mask[cpu/64] = 1 << (cpu % 64)
	param := int32(0) // struct sched_param: a priority of 0
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETAFFINITY, 0, unsafe.Sizeof(mask), uintptr(unsafe.Pointer(&mask))); e != 0 {
		panic(e)
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SCHED_SETSCHEDULER, 0, schedIdle, uintptr(unsafe.Pointer(&param))); e != 0 {
		panic(e)
	}
	os.Stdout.WriteString("spinning\n")
	for {
	}
}
