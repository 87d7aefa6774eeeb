package main

import (
	"bufio"
	"debug/elf"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// No container engine runs where the tests run, so the Dockerfile is
// checked as far as it can be without one: its instructions (a static
// build, a distroless final stage, a non-root user, the /data volume, no
// token baked in), and its build step, run here as written, gives a
// static binary that serves the way the image's CMD asks.
func TestDockerfile(t *testing.T) {
	gittest.Long(t, "the Dockerfile's build step, a static build of the binary")
	if testing.Short() {
		t.Skip("builds the binary")
	}
	data, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	for _, want := range []string{
		`(?m)^FROM golang:1\.\d+\S* AS build$`,
		`(?m)^FROM gcr\.io/distroless/static-debian\d+:nonroot$`,
		`(?m)^COPY --from=build --chown=65532:65532 /out/data /data$`,
		`(?m)^ENV GITMEM_REPO=/data\b`,
		`(?m)^VOLUME /data$`,
		`(?m)^EXPOSE 7077$`,
		`(?m)^USER 65532:65532$`,
		`(?m)^ENTRYPOINT \["/usr/local/bin/gitmem"\]$`,
		`(?m)^CMD \["serve", "--http", "0\.0\.0\.0:7077"\]$`,
	} {
		if !regexp.MustCompile(want).MatchString(df) {
			t.Errorf("the Dockerfile has no line matching %s", want)
		}
	}
	if strings.Contains(df, "ENV GITMEM_TOKEN") || strings.Contains(df, "ARG GITMEM_TOKEN") {
		t.Error("the image must not hold a token")
	}
	build := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build [^\\\n]*)`).FindStringSubmatch(df)
	if build == nil {
		t.Fatal("no CGO_ENABLED=0 go build step")
	}
	out := t.TempDir()
	cmdline := strings.NewReplacer("/out/gitmem", filepath.Join(out, "gitmem"), "${BUILD_DATE}", "2026-03-01T00:00:00Z").Replace(build[1])
	cmd := exec.Command("sh", "-c", cmdline)
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmdline, err, b)
	}
	bin := filepath.Join(out, "gitmem")
	if f, err := elf.Open(bin); err == nil {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("the binary is dynamically linked; distroless/static has no libc")
			}
		}
		f.Close()
	}
	if b, err := exec.Command(bin, "--version").Output(); err != nil || !strings.Contains(string(b), "built 2026-03-01T00:00:00Z") {
		t.Errorf("--version: %s %v", b, err)
	}

	// The image's command, with the image's environment: refused without
	// a token, serving with one from the environment.
	env := append(os.Environ(), "GITMEM_REPO="+filepath.Join(out, "data"), "GITMEM_LOG_FORMAT=json")
	refuse := exec.Command(bin, "serve", "--http", "0.0.0.0:7077")
	refuse.Env = append(env, "GITMEM_TOKEN=")
	if b, err := refuse.CombinedOutput(); err == nil || !strings.Contains(string(b), "refusing to serve 0.0.0.0:7077 without a token") {
		t.Errorf("without a token: %v %s", err, b)
	}
	srv := exec.Command(bin, "serve", "--http", "0.0.0.0:0")
	srv.Env = append(env, "GITMEM_TOKEN=s3cret")
	stderr, _ := srv.StderrPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	lines := bufio.NewScanner(stderr)
	var port string
	for lines.Scan() {
		if m := regexp.MustCompile(`serving the memory tool on http://\S*:(\d+)/`).FindStringSubmatch(lines.Text()); m != nil {
			port = m[1]
			break
		}
	}
	go func() {
		for lines.Scan() {
		}
	}()
	client := http.Client{Timeout: 10 * time.Second}
	req, _ := http.NewRequest("POST", "http://127.0.0.1:"+port+"/v1/tool_use", strings.NewReader(`{"type":"tool_use","id":"t1","name":"memory","input":{"command":"view","path":"/memories"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer s3cret")
	res, err := client.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("a call with the token from the environment: %v %v", res, err)
	}
	res.Body.Close()
}
