//go:build bench

package bench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ticksPerSecond is Linux's USER_HZ, the unit of /proc's CPU times.
const ticksPerSecond = 100

// components names the processes whose CPU time a fleet scenario reports, by
// the command name /proc gives them (at most 15 characters).
var components = map[string]string{
	"kube-apiserver":  "apiserver",
	"etcd":            "etcd",
	"kube-controller": "controller-manager",
	"kube-scheduler":  "scheduler",
	"kwok":            "kwok",
	"provider":        "provider",
}

// cpuSeconds returns the CPU time, user and system, each component has used
// so far; "bench" is this process (the floor's client, the probes, the
// polls), "machine" every core's busy time. On two cores the machine is
// saturated when it is busy for about twice the wall time: what one
// component spends more is then time the others wait.
func cpuSeconds() map[string]float64 {
	out := map[string]float64{}
	self := strconv.Itoa(os.Getpid())
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		command, seconds, ok := procCPU(d)
		name, known := components[command]
		if filepath.Base(d) == self {
			name, known = "bench", true
		}
		if ok && known {
			out[name] += seconds
		}
	}
	if raw, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(raw), "\n")
		f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
		busy := 0.0
		for i, v := range f[1:] {
			x, _ := strconv.ParseFloat(v, 64)
			if i != 3 && i != 4 && i < 8 {
				busy += x
			}
		}
		out["machine"] = busy / ticksPerSecond
	}
	return out
}

// cpuSince is what each component used since before was read.
func cpuSince(before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range cpuSeconds() {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// cpuOfPid is the CPU time, user and system, process pid has used so far; 0
// once it is gone.
func cpuOfPid(pid int) float64 {
	_, seconds, _ := procCPU(filepath.Join("/proc", strconv.Itoa(pid)))
	return seconds
}

// procCPU reads the command name and the CPU time, user and system, of the
// process whose /proc directory is dir.
func procCPU(dir string) (command string, seconds float64, ok bool) {
	raw, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return "", 0, false
	}
	s := string(raw)
	open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || closing < open {
		return "", 0, false
	}
	// After the command: state, then utime and stime are the 12th and 13th
	// fields.
	f := strings.Fields(s[closing+1:])
	if len(f) < 13 {
		return "", 0, false
	}
	u, _ := strconv.ParseFloat(f[11], 64)
	k, _ := strconv.ParseFloat(f[12], 64)
	return s[open+1 : closing], (u + k) / ticksPerSecond, true
}
