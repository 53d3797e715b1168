package app

import (
	"bufio"
	"context"
	"debug/elf"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []instruction
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(cont + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{strings.ToUpper(cmd), strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	return out
}

func find(ins []instruction, cmd string) []string {
	var out []string
	for _, i := range ins {
		if i.cmd == cmd {
			out = append(out, i.args)
		}
	}
	return out
}

// execForm decodes a JSON-array instruction argument.
func execForm(t *testing.T, s string) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("not an exec-form array: %s", s)
	}
	return v
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// TestDockerfile checks the image's contract, then does what the build
// stage does (same env and flags) and runs the result the way the image
// would: static binary, entrypoint arguments, healthcheck subcommand,
// SIGTERM. No Docker engine is needed.
func TestDockerfile(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	root := moduleRoot(t)
	ins := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	from := find(ins, "FROM")
	if len(from) != 2 || from[0] != "golang:1.26 AS build" || from[1] != "gcr.io/distroless/static-debian12:nonroot" {
		t.Fatalf("FROM = %q", from)
	}
	checks := map[string]string{
		"USER": "nonroot:nonroot", "EXPOSE": "8080 9090",
		"ENTRYPOINT": `["/pacegate"]`, "CMD": `["--config", "/etc/pacegate/pacegate.yaml"]`,
		"HEALTHCHECK": `--interval=15s --timeout=5s --start-period=10s --retries=3 CMD ["/pacegate", "healthcheck"]`,
	}
	for cmd, want := range checks {
		if got := find(ins, cmd); len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", cmd, got, want)
		}
	}
	build := buildLine(t, find(ins, "RUN"))
	bin := filepath.Join(t.TempDir(), "pacegate")
	env, args := buildCommand(t, build, bin)
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	assertStatic(t, bin)
	runImage(t, bin, execForm(t, checks["ENTRYPOINT"]), execForm(t, checks["CMD"]), dockerEnv(find(ins, "ENV")))
}

// buildLine returns the RUN that builds the binary.
func buildLine(t *testing.T, runs []string) string {
	t.Helper()
	for _, r := range runs {
		if strings.Contains(r, "go build") {
			return r
		}
	}
	t.Fatal("no RUN ... go build in the Dockerfile")
	return ""
}

// buildCommand turns `CGO_ENABLED=0 go build -trimpath -ldflags "..." -o
// /out/pacegate .` into env and go arguments, writing to bin instead.
func buildCommand(t *testing.T, line, bin string) (env, args []string) {
	t.Helper()
	line = strings.ReplaceAll(line, "${VERSION}", "docker-test")
	m := regexp.MustCompile(`^(CGO_ENABLED=0) go build -trimpath -ldflags "([^"]*)" -o (\S+) \.$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("unexpected build line: %s", line)
	}
	if !strings.Contains(m[2], "-s -w") {
		t.Fatalf("ldflags %q lack -s -w", m[2])
	}
	return []string{m[1]}, []string{"build", "-trimpath", "-ldflags", m[2], "-o", bin, "."}
}

// assertStatic fails unless bin is an ELF without an interpreter or
// shared libraries: it must run on distroless/static.
func assertStatic(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary has a PT_INTERP header: it is dynamically linked")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the binary needs shared libraries: %v", libs)
	}
	if f.Section(".symtab") != nil {
		t.Fatal("the binary has a symbol table: -s was not applied")
	}
}

func dockerEnv(envs []string) map[string]string {
	out := map[string]string{}
	for _, e := range envs {
		for _, kv := range strings.Fields(e) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				out[k] = v
			}
		}
	}
	return out
}

// runImage starts bin as the image would (ENTRYPOINT + CMD, the image's
// ENV), with the config path pointing at a temp file and the listeners
// moved to free loopback ports, then health-checks it and stops it.
func runImage(t *testing.T, bin string, entry, cmdArgs []string, env map[string]string) {
	t.Helper()
	if env["PACEGATE_LISTEN"] != "0.0.0.0:8080" || env["PACEGATE_ADMIN_LISTEN"] != "0.0.0.0:9090" {
		t.Fatalf("ENV = %v: the listeners must bind all interfaces in a container", env)
	}
	cfgPath := filepath.Join(t.TempDir(), "pacegate.yaml")
	write(t, cfgPath, "upstreams: [{url: \""+startSim(t)+"\"}]\ntenants: [{id: a, keys: [k]}]\n")
	args := slices.Clone(cmdArgs)
	i := slices.Index(args, "/etc/pacegate/pacegate.yaml")
	if entry[0] != "/pacegate" || i < 0 {
		t.Fatalf("ENTRYPOINT %v CMD %v", entry, cmdArgs)
	}
	args[i] = cfgPath
	listen := "PACEGATE_LISTEN=127.0.0.1:" + freePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	proc := exec.CommandContext(ctx, bin, args...)
	proc.Env = append(os.Environ(), listen, "PACEGATE_ADMIN_LISTEN=127.0.0.1:"+freePort(t))
	logs := new(syncBuffer)
	proc.Stdout, proc.Stderr = logs, logs
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	health := func() error {
		c := exec.Command(bin, "healthcheck") // the HEALTHCHECK CMD
		c.Env = append(os.Environ(), listen)
		return c.Run()
	}
	deadline := time.Now().Add(10 * time.Second)
	for health() != nil { // the process starts on its own schedule
		if time.Now().After(deadline) {
			t.Fatalf("pacegate healthcheck did not pass within 10s; process output:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := proc.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := proc.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, logs)
	}
	if err := health(); err == nil {
		t.Fatal("healthcheck passed with the gateway stopped")
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return port
}
