//go:build unix

package gitmem

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"golang.org/x/crypto/ssh"

	gd "github.com/gitmem-dev/gitmem/gitmem/internal/gitdir"
	"github.com/gitmem-dev/gitmem/gitmem/internal/remote"
	"github.com/gitmem-dev/gitmem/internal/gittest"
)

// Sharing through real servers on loopback, started by the test: git
// daemon (git://), git http-backend (smart http, behind basic auth), an
// ssh server running git-upload-pack and git-receive-pack, and the path
// and file:// forms.

func gitExecPath(t testing.TB, tool string) string {
	t.Helper()
	out, err := gittest.Command(t, "", "--exec-path").Output()
	if err != nil {
		t.Skipf("no git CLI: %v", err)
	}
	p := filepath.Join(strings.TrimSpace(string(out)), tool)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("%s is not installed (it comes with Debian's git package): %v", tool, err)
	}
	return p
}

// roundTrip shares a memory through url: one agent clones and pushes,
// another clones, changes and syncs, the first pulls.
func roundTrip(t *testing.T, url string, opt SyncOptions) {
	t.Helper()
	ctx := context.Background()
	a, _, err := Clone(ctx, url, filepath.Join(gittest.TempDir(t), "a"), agentOptions(t, "a"), opt)
	if err != nil {
		t.Fatalf("clone: %v", err)
	}
	defer a.Close()
	put(t, a, "t1", "notes.md", "from a\n")
	if res, err := a.Push(ctx, "origin", opt); err != nil || res.Pushed != 2 {
		t.Fatalf("push: %+v %v", res, err)
	}
	b, _, err := Clone(ctx, url, filepath.Join(gittest.TempDir(t), "b"), agentOptions(t, "b"), opt)
	if err != nil {
		t.Fatalf("second clone: %v", err)
	}
	defer b.Close()
	if got := files(t, b)["notes.md"]; got != "from a\n" {
		t.Fatalf("the second clone holds %q", got)
	}
	put(t, b, "t2", "notes.md", "from a\nand b\n")
	put(t, a, "t3", "other.md", "a again\n")
	if _, err := a.Sync(ctx, "origin", opt); err != nil {
		t.Fatalf("%v (%v)", err, errors.Unwrap(err))
	}
	res, err := b.Sync(ctx, "origin", opt)
	if err != nil || res.Merge == "" || res.Pushed == 0 {
		t.Fatalf("sync with a merge: %+v %v", res, err)
	}
	if res, err := a.Pull(ctx, "origin", opt); err != nil || res.FastForward == "" {
		t.Fatalf("pull: %+v %v", res, err)
	}
	if got := files(t, a); got["notes.md"] != "from a\nand b\n" || got["other.md"] != "a again\n" {
		t.Fatalf("after the round trip: %v", got)
	}
}

func TestSharePath(t *testing.T) {
	t.Parallel()
	dir := bareRemote(t)
	roundTrip(t, dir, SyncOptions{})
	gittest.Fsck(t, dir)
}

func TestShareFileURL(t *testing.T) {
	t.Parallel()
	dir := bareRemote(t)
	roundTrip(t, "file://"+dir, SyncOptions{})
	gittest.Fsck(t, dir)
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestShareGitDaemon(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", filepath.Join(root, "memory.git"))
	roundTrip(t, gitDaemon(t, root)+"/memory.git", SyncOptions{})
	gittest.Fsck(t, filepath.Join(root, "memory.git"))
}

// A push reads the memory's packs mapped, as git does: which objects to
// send walks every new tree through its delta chain, and the pack sent
// copies their entries, and each was a pread (114,000 for a push of
// 10,000 commits through git daemon).
func TestPushReadsThePacksMapped(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", filepath.Join(root, "memory.git"))
	url := gitDaemon(t, root) + "/memory.git"
	var links []*gd.Store
	opt := agentOptions(t, "a")
	opt.hooks = &testHooks{env: new(gd.Env), link: func(st *gd.Store) { links = append(links, st) }}
	a, _, err := Clone(context.Background(), url, filepath.Join(gittest.TempDir(t), "a"), opt, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { a.Close() }() // the one opened again below
	writeVersions(t, a, 0, 6)
	if err := a.Close(); err != nil { // the commits in git's packs, none held in memory
		t.Fatal(err)
	}
	if a, err = Open(context.Background(), a.Dir(), opt); err != nil {
		t.Fatal(err)
	}
	links = nil
	if res, err := a.Push(context.Background(), "origin", SyncOptions{}); err != nil || res.Pushed != 7 {
		t.Fatalf("push: %+v %v", res, err)
	}
	if len(links) != 1 {
		t.Fatalf("the push made %d links", len(links))
	}
	if n := links[0].PackFileReads(); n != 0 {
		t.Errorf("the push read %d pack entries with a system call each; want them read mapped", n)
	}
	gittest.Fsck(t, filepath.Join(root, "memory.git"))
}

// A push through git daemon sends each delta as git push does: by the
// offset of its base's entry, earlier in the pack (OFS_DELTA, which git's
// receive-pack advertises), not by the base's 20-byte hash (REF_DELTA):
// at 10,000 commits gitmem sent 6.08 MB where git push sent 5.40. The
// remote keeps the pack as sent (receive.unpackLimit 1).
func TestPushSendsOffsetDeltas(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	bare := filepath.Join(root, "memory.git")
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", bare)
	gittest.Git(t, bare, "config", "receive.unpackLimit", "1")
	url := gitDaemon(t, root) + "/memory.git"
	opt := agentOptions(t, "a")
	a, _, err := Clone(context.Background(), url, filepath.Join(gittest.TempDir(t), "a"), opt, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { a.Close() }() // the one opened again below
	writeVersions(t, a, 0, 1)
	notes := strings.Repeat("a line of notes\n", 100)
	for v := range 6 { // a file and its folders, each a delta of the version before
		notes += fmt.Sprintf("line %d\n", v)
		put(t, a, fmt.Sprint("t", v), "d1/notes.md", notes)
	}
	if _, err := a.GC(context.Background(), true); err != nil { // one pack, with deltas
		t.Fatal(err)
	}
	if err := a.Close(); err != nil { // none held in memory
		t.Fatal(err)
	}
	if a, err = Open(context.Background(), a.Dir(), opt); err != nil {
		t.Fatal(err)
	}
	if res, err := a.Push(context.Background(), "origin", SyncOptions{}); err != nil || res.Pushed != 8 {
		t.Fatalf("push: %+v %v", res, err)
	}
	packs, _ := filepath.Glob(filepath.Join(bare, "objects", "pack", "*.pack"))
	if len(packs) != 1 {
		t.Fatalf("the remote holds %d packs", len(packs))
	}
	data, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	sc := packfile.NewScanner(bytes.NewReader(data))
	_, n, err := sc.Header()
	if err != nil {
		t.Fatal(err)
	}
	var ofs, ref int
	for range n {
		h, err := sc.NextObjectHeader()
		if err != nil {
			t.Fatal(err)
		}
		switch h.Type {
		case plumbing.OFSDeltaObject:
			ofs++
		case plumbing.REFDeltaObject:
			ref++
		}
	}
	if ofs == 0 || ref != 0 {
		t.Errorf("the pack sent holds %d OFS_DELTA and %d REF_DELTA entries; want every delta by offset", ofs, ref)
	}
	gittest.Git(t, bare, "verify-pack", strings.TrimSuffix(packs[0], ".pack")+".idx")
	gittest.Fsck(t, bare)
}

// gitDaemon serves the repositories under root with git daemon, and
// returns its git:// URL.
func gitDaemon(t testing.TB, root string) string {
	gitExecPath(t, "git-daemon")
	port := freePort(t)
	cmd := exec.Command("git", "daemon", "--reuseaddr", "--listen=127.0.0.1", fmt.Sprintf("--port=%d", port),
		"--base-path="+root, "--export-all", "--enable=receive-pack", root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the daemon forks a child per connection
	if err := cmd.Start(); err != nil {
		t.Skipf("git daemon does not start: %v", err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	waitListening(t, fmt.Sprintf("127.0.0.1:%d", port))
	return fmt.Sprintf("git://127.0.0.1:%d", port)
}

func waitListening(t testing.TB, addr string) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return
		}
	}
	t.Fatalf("nothing listens on %s", addr)
}

// gitHTTP serves the repositories under root with git http-backend, as a
// CGI behind basic auth (user "agent", password token). before, if not
// nil, runs before each request is served.
func gitHTTP(t *testing.T, root, token string, before func(*http.Request)) *httptest.Server {
	backend := gitExecPath(t, "git-http-backend")
	cgiHandler := &cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != "agent" || pass != token {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		r.Header.Set("REMOTE_USER", user) // http-backend allows receive-pack for an authenticated user
		if before != nil {
			before(r)
		}
		cgiHandler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestShareSmartHTTP(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	repo := filepath.Join(root, "memory.git")
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", repo)
	gittest.Git(t, repo, "config", "http.receivepack", "true")
	srv := gitHTTP(t, root, "s3cret-token", nil)
	url := srv.URL + "/memory.git"
	roundTrip(t, url, SyncOptions{Auth: RemoteAuth{User: "agent", Token: "s3cret-token"}})
	gittest.Fsck(t, repo)

	// Wrong or missing credentials: a clear error, nothing cloned, and
	// never a password in .git/config.
	for _, auth := range []RemoteAuth{{}, {User: "agent", Token: "wrong"}} {
		dir := filepath.Join(gittest.TempDir(t), "c")
		_, _, err := Clone(context.Background(), url, dir, agentOptions(t, "c"), SyncOptions{Auth: auth})
		var re *RemoteError
		if !errors.As(err, &re) || !(errors.Is(err, remote.ErrAuth) || errors.Is(err, remote.ErrNoAuth)) {
			t.Errorf("clone with %+v: %v", auth, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a failed clone left %s", dir)
		}
	}
	if _, _, err := Clone(context.Background(), strings.Replace(url, "http://", "http://agent:s3cret-token@", 1), filepath.Join(gittest.TempDir(t), "d"), agentOptions(t, "d"), SyncOptions{}); err == nil || !strings.Contains(err.Error(), "password") {
		t.Errorf("a URL with a password: %v", err)
	}
	a, _, err := Clone(context.Background(), url, filepath.Join(gittest.TempDir(t), "e"), agentOptions(t, "e"), SyncOptions{Auth: RemoteAuth{User: "agent", Token: "s3cret-token"}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	cfg, _ := os.ReadFile(filepath.Join(a.Dir(), ".git", "config"))
	if strings.Contains(string(cfg), "s3cret") {
		t.Errorf(".git/config holds the token:\n%s", cfg)
	}
}

// sshServer runs git-upload-pack and git-receive-pack for clients that
// present clientKey, and returns its address and host key line for
// known_hosts.
func sshServer(t *testing.T, root string, clientKey ssh.PublicKey) string {
	_, hostPriv, _ := ed25519.GenerateKey(rand.Reader)
	hostSigner, _ := ssh.NewSignerFromKey(hostPriv)
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if string(k.Marshal()) == string(clientKey.Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unknown key")
	}}
	cfg.AddHostKey(hostSigner)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serveSSH(c, cfg, root)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	known := filepath.Join(t.TempDir(), "known_hosts")
	line := fmt.Sprintf("[127.0.0.1]:%d %s", port, ssh.MarshalAuthorizedKey(hostSigner.PublicKey()))
	os.WriteFile(known, []byte(line), 0o600)
	t.Setenv("SSH_KNOWN_HOSTS", known)
	return ln.Addr().String()
}

func serveSSH(c net.Conn, cfg *ssh.ServerConfig, root string) {
	_, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "no")
			continue
		}
		ch, reqs, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			defer ch.Close()
			for req := range reqs {
				if req.Type != "exec" {
					req.Reply(false, nil)
					continue
				}
				var payload struct{ Command string }
				ssh.Unmarshal(req.Payload, &payload)
				prog, arg, _ := strings.Cut(payload.Command, " ")
				if prog != "git-upload-pack" && prog != "git-receive-pack" {
					req.Reply(false, nil)
					return
				}
				req.Reply(true, nil)
				cmd := exec.Command("git", strings.TrimPrefix(prog, "git-"), filepath.Join(root, strings.Trim(arg, "'/")))
				cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
				status := 0
				if err := cmd.Run(); err != nil {
					status = 1
				}
				ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
				return
			}
		}()
	}
}

func TestShareSSH(t *testing.T) {
	gitExecPath(t, "git-upload-pack")
	root := gittest.TempDir(t)
	repo := filepath.Join(root, "memory.git")
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", repo)
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "id_ed25519")
	os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600)
	sshPub, _ := ssh.NewPublicKey(pub)
	addr := sshServer(t, root, sshPub)
	url := "ssh://git@" + addr + "/memory.git"
	roundTrip(t, url, SyncOptions{Auth: RemoteAuth{SSHKey: keyFile}})
	gittest.Fsck(t, repo)

	// Another key is refused with a clear error.
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	block, _ = ssh.MarshalPrivateKey(other, "")
	otherFile := filepath.Join(t.TempDir(), "other")
	os.WriteFile(otherFile, pem.EncodeToMemory(block), 0o600)
	_, _, err = Clone(context.Background(), url, filepath.Join(gittest.TempDir(t), "x"), agentOptions(t, "x"), SyncOptions{Auth: RemoteAuth{SSHKey: otherFile}})
	var re *RemoteError
	if !errors.As(err, &re) {
		t.Errorf("clone with a key the server does not know: %v", err)
	}
}

// A sync that fails says what failed (issue 21, item 13): a remote that
// moved before every push (another agent always first) is a
// RemoteMovedError after the retries, the merges kept; a remote that
// refuses the push as such (a hook) is not retried and its reason is
// given.
func TestSyncSaysWhatFailed(t *testing.T) {
	t.Parallel()
	root := gittest.TempDir(t)
	repo := filepath.Join(root, "memory.git")
	gittest.Git(t, "", "init", "-q", "--bare", "--initial-branch=main", repo)
	gittest.Git(t, repo, "config", "http.receivepack", "true")
	moving := false
	srv := gitHTTP(t, root, "tok", func(r *http.Request) {
		if moving && r.Method == "POST" && strings.HasSuffix(r.URL.Path, "/git-receive-pack") {
			// Another agent pushes first: the branch moves on.
			c := strings.TrimSpace(gittest.Git(t, repo, "commit-tree", "-p", "main", "-m", "another agent", "main^{tree}"))
			gittest.Git(t, repo, "update-ref", "refs/heads/main", c)
		}
	})
	opt := SyncOptions{Auth: RemoteAuth{User: "agent", Token: "tok"}, Retries: 2}
	a, _, err := Clone(context.Background(), srv.URL+"/memory.git", filepath.Join(gittest.TempDir(t), "a"), agentOptions(t, "a"), opt)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	put(t, a, "t1", "a.md", "a\n")
	if _, err := a.Sync(context.Background(), "origin", opt); err != nil {
		t.Fatal(err)
	}

	moving = true
	put(t, a, "t2", "a.md", "b\n")
	res, err := a.Sync(context.Background(), "origin", opt)
	var moved *RemoteMovedError
	if !errors.As(err, &moved) || moved.Attempts != 3 || !errors.Is(err, ErrNonFastForward) || res.Retries != 2 || res.Merges != 2 {
		t.Fatalf("a remote that moves before every push: %v (%+v)", err, res)
	}
	if want := "origin moved again before each of 3 pushes (other agents pushed first each time); what was merged stays here, nothing was pushed"; !strings.Contains(err.Error(), want) {
		t.Errorf("%q lacks %q", err, want)
	}
	if got := gittest.Git(t, a.Dir(), "log", "-1", "--format=%s"); !strings.HasPrefix(got, "memory: merge origin/main") {
		t.Errorf("the merge is not kept: HEAD is %q", got)
	}
	moving = false

	// A hook that refuses every push: no retry, its reason named.
	hook := filepath.Join(repo, "hooks", "pre-receive")
	os.WriteFile(hook, []byte("#!/bin/sh\necho 'pushes are closed' >&2\nexit 1\n"), 0o700)
	put(t, a, "t3", "a.md", "c\n")
	res, err = a.Sync(context.Background(), "origin", opt)
	var re *RemoteError
	if !errors.As(err, &re) || errors.Is(err, ErrNonFastForward) || res.Retries != 0 || !strings.Contains(err.Error(), "push to origin: the remote refused to update refs/heads/main: pre-receive hook declined") {
		t.Fatalf("a push a hook declines: %v (%+v)", err, res)
	}
	gittest.Fsck(t, a.Dir())
	gittest.Fsck(t, repo)
}
