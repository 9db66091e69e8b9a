package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/airlock-sandbox/airlock"
)

// testSessionKey signs the blobs of keyedSandbox, as a shared store needs.
var testSessionKey = []byte("server tests' session key, 32+ b")

var (
	keyedOnce sync.Once
	keyedSB   *airlock.Sandbox
	keyedErr  error
)

// keyedSandbox is a Sandbox with a session key, made once for the
// package's store tests (closed by TestMain).
func keyedSandbox(t testing.TB) *airlock.Sandbox {
	t.Helper()
	keyedOnce.Do(func() {
		keyedSB, keyedErr = airlock.New(context.Background(), airlock.WithSessionKey(testSessionKey))
	})
	if keyedErr != nil {
		t.Fatal(keyedErr)
	}
	return keyedSB
}

// redisServer is a real redis-server on a loopback port, its data (an
// append-only file, fsynced on every write) in a directory of the test's.
type redisServer struct {
	t     testing.TB
	bin   string
	dir   string
	port  int
	cmd   *exec.Cmd
	fsync string // appendfsync: always (tests: nothing lost on a stop) or everysec
}

// startRedis starts redis-server; a machine without one fails the test
// (scripts/setup.sh installs Debian's redis-server package where it can).
func startRedis(t testing.TB) *redisServer { return startRedisFsync(t, "always") }

func startRedisFsync(t testing.TB, fsync string) *redisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("the store tests need redis-server (scripts/setup.sh installs it where it can; else apt-get install redis-server): %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	r := &redisServer{t: t, bin: bin, dir: t.TempDir(), port: port, fsync: fsync}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *redisServer) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

func (r *redisServer) start() {
	r.t.Helper()
	r.cmd = exec.Command(r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", r.fsync, "--daemonize", "no", "--logfile", "")
	var logs bytes.Buffer
	r.cmd.Stdout, r.cmd.Stderr = &logs, &logs
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.port), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.stop()
			r.t.Fatalf("redis-server did not answer: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop stops redis-server (SIGTERM: it closes its append-only file).
func (r *redisServer) stop() {
	if r.cmd == nil {
		return
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { r.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		r.cmd.Process.Kill()
		<-done
	}
	r.cmd = nil
}

// client is a plain client to look into (and tamper with) the store.
func (r *redisServer) client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.port), MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

func newRedisStore(t testing.TB, r *redisServer, opts RedisOptions) *RedisStore {
	t.Helper()
	opts.URL = r.url()
	s, err := NewRedisStore(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// replica serves the keyed Sandbox with its own RedisStore (its own
// connections and cache), as one `airlock serve` process would.
func replica(t testing.TB, r *redisServer, opts RedisOptions) (string, *RedisStore) {
	t.Helper()
	store := newRedisStore(t, r, opts)
	url, _ := serve(t, Config{Sandbox: keyedSandbox(t), SessionStore: store})
	return url, store
}

func newSessionHTTP(t *testing.T, url, body string) string {
	t.Helper()
	r := post(t, url+"/v1/sessions", "", body)
	wantStatus(t, r, 201, "")
	var info SessionInfo
	if err := json.Unmarshal(r.body, &info); err != nil || info.ID == "" {
		t.Fatalf("new session: %s (%v)", r.body, err)
	}
	return info.ID
}

func runSessionHTTP(t *testing.T, url, id, code string) (response, SessionResult) {
	t.Helper()
	b, _ := json.Marshal(SessionRunRequest{Code: code})
	r := post(t, url+"/v1/sessions/"+id+"/run", "", string(b))
	var res SessionResult
	if r.status == 200 {
		if err := json.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
	}
	return r, res
}

// mustRun runs code in session id on url and wants its stdout.
func mustRun(t *testing.T, url, id, code, stdout string) {
	t.Helper()
	r, res := runSessionHTTP(t, url, id, code)
	wantStatus(t, r, 200, "")
	if res.Stdout != stdout || res.RolledBack || res.Error != nil {
		t.Fatalf("run %q on %s: stdout %q (want %q), %s", code, url, res.Stdout, stdout, r.body)
	}
}

func listHTTP(t *testing.T, url string) []SessionStatus {
	t.Helper()
	r := do(t, "GET", url+"/v1/sessions", "", "")
	wantStatus(t, r, 200, "")
	var l SessionList
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatal(err)
	}
	return l.Sessions
}

// A session made on one replica is called on a second, forked on a
// third, listed and deleted from any: the replicas share nothing but
// Redis.
func TestRedisSessionsAcrossReplicas(t *testing.T) {
	rs := startRedis(t)
	a, _ := replica(t, rs, RedisOptions{})
	b, _ := replica(t, rs, RedisOptions{})
	c, _ := replica(t, rs, RedisOptions{})

	id := newSessionHTTP(t, a, `{"files": {"in.txt": "c2VlZA=="}, "env": {"GREETING": "hi"}}`)
	mustRun(t, b, id, "import os\nx = 40\nopen('notes.txt', 'w').write(open('in.txt').read())\nprint(os.environ['GREETING'])", "hi\n")
	mustRun(t, c, id, "x += 1\nprint(x, open('notes.txt').read())", "41 seed\n")
	// b has the session cached at the state after its own call; c moved
	// it on since, so b must load the newer state, not reuse its own.
	mustRun(t, b, id, "print(x)", "41\n")

	r := post(t, c+"/v1/sessions/"+id+"/fork", "", "")
	wantStatus(t, r, 201, "")
	var fork SessionInfo
	if err := json.Unmarshal(r.body, &fork); err != nil || fork.ID == "" || fork.ID == id {
		t.Fatalf("fork: %s", r.body)
	}
	mustRun(t, a, fork.ID, "x += 100\nprint(x)", "141\n")
	mustRun(t, b, id, "print(x)", "41\n") // the two evolve apart

	for _, url := range []string{a, b, c} {
		l := listHTTP(t, url)
		if len(l) != 2 || l[0].ID != id || l[1].ID != fork.ID || l[0].Calls != 4 || l[1].Calls != 1 || l[0].Running || l[0].LastCall == nil {
			t.Fatalf("list on %s: %+v", url, l)
		}
	}
	wantStatus(t, do(t, "DELETE", b+"/v1/sessions/"+id, "", ""), 204, "")
	r, _ = runSessionHTTP(t, a, id, "print(x)")
	wantStatus(t, r, 404, "not_found")
	r, _ = runSessionHTTP(t, b, id, "print(x)") // b's cached copy went with it
	wantStatus(t, r, 404, "not_found")
	wantStatus(t, post(t, c+"/v1/sessions/"+id+"/fork", "", ""), 404, "not_found")
	wantStatus(t, do(t, "DELETE", c+"/v1/sessions/"+id, "", ""), 404, "not_found")
	if l := listHTTP(t, c); len(l) != 1 || l[0].ID != fork.ID {
		t.Fatalf("list after delete: %+v", l)
	}
	wantStatus(t, do(t, "DELETE", a+"/v1/sessions/"+fork.ID, "", ""), 204, "")
	if l := listHTTP(t, b); len(l) != 0 {
		t.Fatalf("list after both deleted: %+v", l)
	}
}

// Two replicas calling one session at once: one runs, the other gets 409
// session_busy at once, and the next call sees the first one's state.
func TestRedisSessionBusyAcrossReplicas(t *testing.T) {
	rs := startRedis(t)
	a, store := replica(t, rs, RedisOptions{})
	b, _ := replica(t, rs, RedisOptions{})
	id := newSessionHTTP(t, a, "")
	done := make(chan SessionResult, 1)
	go func() {
		b, _ := json.Marshal(SessionRunRequest{Code: "import time\ntime.sleep(2)\nslept = True\nprint('done')"})
		r := do(t, "POST", a+"/v1/sessions/"+id+"/run", "", string(b))
		var res SessionResult
		json.Unmarshal(r.body, &res)
		done <- res
	}()
	rc := rs.client(t)
	deadline := time.Now().Add(30 * time.Second)
	for rc.Exists(context.Background(), store.lockKey(id)).Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the first call never took the lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	start := time.Now()
	r, _ := runSessionHTTP(t, b, id, "print('second')")
	wantStatus(t, r, 409, "session_busy")
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("the busy answer took %v: it must not wait for the call", d)
	}
	if l := listHTTP(t, b); len(l) != 1 || !l[0].Running {
		t.Fatalf("list during the call: %+v", l)
	}
	if res := <-done; res.Stdout != "done\n" || res.RolledBack {
		t.Fatalf("first call: %+v", res)
	}
	mustRun(t, b, id, "print(slept)", "True\n")
}

// A replica that dies mid-call leaves the session locked until its lease
// runs out, then at its state before that call. One that merely lost its
// lease (stalled past it) cannot write over the newer state: the fence.
func TestRedisLeaseExpiresAndFences(t *testing.T) {
	rs := startRedis(t)
	a, _ := replica(t, rs, RedisOptions{})
	id := newSessionHTTP(t, a, "")
	mustRun(t, a, id, "x = 1", "")

	// The dying replica: it takes the lock, advances its live copy, and
	// is cut off before it stores anything (no renewal, no release).
	dead := newRedisStore(t, rs, RedisOptions{Lease: 1500 * time.Millisecond})
	sb := keyedSandbox(t)
	call, err := dead.Begin(context.Background(), sb, id, airlock.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := call.Session().Run(context.Background(), airlock.Request{Code: "x = 2"}); err != nil || res.Error != nil {
		t.Fatalf("the dying call: %v %+v", err, res)
	}
	dead.client.Close()
	r, _ := runSessionHTTP(t, a, id, "print(x)")
	wantStatus(t, r, 409, "session_busy")
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, res := runSessionHTTP(t, a, id, "print(x)")
		if r.status == 200 {
			if res.Stdout != "1\n" {
				t.Fatalf("after the lease: %q, want the state before the dead call", res.Stdout)
			}
			break
		}
		wantStatus(t, r, 409, "session_busy")
		if time.Now().After(deadline) {
			t.Fatal("the lease never ran out")
		}
		time.Sleep(200 * time.Millisecond)
	}
	var storeErr *StoreError
	if err := call.Commit(context.Background(), &airlock.Result{}); !errors.As(err, &storeErr) || !errors.Is(err, ErrStoreUnavailable) {
		t.Fatalf("commit on a closed client: %v, want a *StoreError", err)
	}
	call.Release()

	// The stalled replica: its lock is gone (as if its lease ran out),
	// another call advances the session, then it tries to store its own.
	stalled := newRedisStore(t, rs, RedisOptions{})
	call, err = stalled.Begin(context.Background(), sb, id, airlock.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := call.Session().Run(context.Background(), airlock.Request{Code: "x = 'stale'"})
	if err != nil || res.Error != nil {
		t.Fatalf("the stalled call: %v %+v", err, res)
	}
	rc := rs.client(t)
	if err := rc.Del(context.Background(), stalled.lockKey(id)).Err(); err != nil {
		t.Fatal(err)
	}
	mustRun(t, a, id, "x = 3", "")
	if err := call.Commit(context.Background(), res); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("commit after losing the lease: %v, want ErrLeaseLost", err)
	}
	// Even were the lock to hold its old token again, it could not
	// write: a later token already did (the fence).
	rc.Set(context.Background(), stalled.lockKey(id), call.(*redisCall).token, time.Minute)
	if err := call.Commit(context.Background(), res); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("commit with an old token: %v, want ErrLeaseLost (the fence)", err)
	}
	call.Release()
	mustRun(t, a, id, "print(x)", "3\n")
}

// A blob changed in Redis, or one not signed with the key (say, saved by
// a Sandbox without it), is refused: a store write cannot forge state or
// raise limits. The state is left as it was.
func TestRedisTamperedStateRefused(t *testing.T) {
	rs := startRedis(t)
	a, store := replica(t, rs, RedisOptions{})
	id := newSessionHTTP(t, a, `{"limits": {"timeout_ms": 2000}}`)
	mustRun(t, a, id, "secret = 'kept'", "")
	rc := rs.client(t)
	ctx := context.Background()
	key := store.stateKey(id)
	blob, err := rc.HGet(ctx, key, "blob").Bytes()
	if err != nil {
		t.Fatal(err)
	}
	// The limits are near the start (after magic, version, image sums
	// and calls): raise the timeout as an attacker would.
	forged := bytes.Clone(blob)
	off := 16 + 4 + 64 + 8
	forged[off+7] = 0x7f
	rc.HSet(ctx, key, "blob", forged)
	rc.HIncrBy(ctx, key, "ver", 1) // so no replica's cache stands in for it

	r, _ := runSessionHTTP(t, a, id, "print(secret)")
	wantStatus(t, r, 500, "session_state_rejected")
	_, err = store.Begin(ctx, keyedSandbox(t), id, airlock.LoadOptions{})
	var stateErr *StateError
	if !errors.As(err, &stateErr) || !errors.Is(err, airlock.ErrSessionUnauthenticated) {
		t.Fatalf("Begin on a forged blob: %v, want a *StateError wrapping ErrSessionUnauthenticated", err)
	}
	if got, _ := rc.HGet(ctx, key, "blob").Bytes(); !bytes.Equal(got, forged) {
		t.Fatal("the refused state was changed in the store")
	}
	if n := rc.Exists(ctx, store.lockKey(id)).Val(); n != 0 {
		t.Fatal("a refused load left the session locked")
	}

	// An unsigned blob, from a Sandbox without the key.
	plain, err := sb.NewSession(ctx, airlock.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	var unsigned bytes.Buffer
	if err := plain.Save(&unsigned); err != nil {
		t.Fatal(err)
	}
	rc.HSet(ctx, key, "blob", unsigned.Bytes())
	rc.HIncrBy(ctx, key, "ver", 1)
	r, _ = runSessionHTTP(t, a, id, "print(1)")
	wantStatus(t, r, 500, "session_state_rejected")

	// The genuine blob back: the session goes on.
	rc.HSet(ctx, key, "blob", blob)
	rc.HIncrBy(ctx, key, "ver", 1)
	mustRun(t, a, id, "print(secret)", "kept\n")
}

// Redis stopped under calls: every request is answered 503
// session_store_unavailable naming the store, promptly; the call running
// as it stopped is not kept. Restarted, the sessions are at their last
// stored state and calls work again.
func TestRedisDownAndBack(t *testing.T) {
	rs := startRedis(t)
	const lease = 2 * time.Second
	a, store := replica(t, rs, RedisOptions{OpTimeout: time.Second, Lease: lease})
	b, _ := replica(t, rs, RedisOptions{OpTimeout: time.Second, Lease: lease})
	id := newSessionHTTP(t, a, "")
	mustRun(t, b, id, "n = 1", "")

	// A call running as Redis goes away.
	done := make(chan response, 1)
	go func() {
		body, _ := json.Marshal(SessionRunRequest{Code: "import time\ntime.sleep(1.5)\nn = 100"})
		done <- do(t, "POST", a+"/v1/sessions/"+id+"/run", "", string(body))
	}()
	rc := rs.client(t)
	for rc.Exists(context.Background(), store.lockKey(id)).Val() == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	rs.stop()
	wantStatus(t, <-done, 503, "session_store_unavailable")

	checks := []struct{ method, url, body string }{
		{"POST", a + "/v1/sessions/" + id + "/run", `{"code": "n += 1"}`},
		{"POST", b + "/v1/sessions/" + id + "/run", `{"code": "n += 1"}`},
		{"POST", a + "/v1/sessions", ""},
		{"POST", b + "/v1/sessions/" + id + "/fork", ""},
		{"GET", a + "/v1/sessions", ""},
		{"DELETE", b + "/v1/sessions/" + id, ""},
	}
	for _, c := range checks {
		start := time.Now()
		r := do(t, c.method, c.url, "", c.body)
		wantStatus(t, r, 503, "session_store_unavailable")
		if !strings.Contains(string(r.body), store.Name()) || r.header.Get("Retry-After") == "" {
			t.Fatalf("%s %s: %s lacks the store's name %s or Retry-After", c.method, c.url, r.body, store.Name())
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("%s %s took %v with Redis down", c.method, c.url, d)
		}
	}

	rs.start()
	// The interrupted call could not release its lock (Redis was gone):
	// the session is busy until that lease runs out, then free.
	deadline := time.Now().Add(lease + 10*time.Second)
	for {
		r, _ := runSessionHTTP(t, a, id, "print(n)")
		if r.status != 409 {
			wantStatus(t, r, 200, "")
			break
		}
		wantStatus(t, r, 409, "session_busy")
		if time.Now().After(deadline) {
			t.Fatal("the interrupted call's lease never ran out")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The state is the one stored before Redis went: the interrupted
	// call (n = 100) and the refused ones left nothing.
	mustRun(t, a, id, "n += 1\nprint(n)", "2\n")
	mustRun(t, b, id, "n += 1\nprint(n)", "3\n")
	if l := listHTTP(t, a); len(l) != 1 || l[0].ID != id {
		t.Fatalf("list after the restart: %+v", l)
	}
}

// Without a reachable Redis, NewRedisStore fails at once with a
// *StoreError naming it; a bad URL is an error too.
func TestRedisStoreUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = NewRedisStore(context.Background(), RedisOptions{URL: "redis://" + addr + "/0", OpTimeout: time.Second})
	var storeErr *StoreError
	if !errors.As(err, &storeErr) || !strings.Contains(err.Error(), "redis://"+addr+"/0") {
		t.Fatalf("unreachable: %v", err)
	}
	if _, err := NewRedisStore(context.Background(), RedisOptions{URL: "http://nope"}); err == nil {
		t.Fatal("a non-redis URL was accepted")
	}
}
