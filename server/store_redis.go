package server

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/airlock-sandbox/airlock"
)

// Defaults of RedisOptions.
const (
	DefaultRedisLease     = 10 * time.Second
	DefaultRedisOpTimeout = 3 * time.Second
	DefaultRedisCache     = 8
)

// RedisOptions configure NewRedisStore.
type RedisOptions struct {
	// URL is redis://[:PASSWORD@]HOST:PORT/DB (rediss:// for TLS).
	URL string
	// TTL is how long a session may sit idle before the store forgets it
	// (as the Sandbox's WithSessionTTL; 0: airlock.DefaultSessionTTL,
	// negative: never).
	TTL time.Duration
	// MaxSessions caps the stored sessions (0: airlock.DefaultMaxSessions).
	// The check and the write are not one step, so replicas creating
	// sessions at the same moment may pass it by a few.
	MaxSessions int
	// Lease is how long a call's lock lasts unless renewed (default 10 s).
	// A running call renews it every Lease/3; a replica that dies holds
	// the session for at most Lease.
	Lease time.Duration
	// OpTimeout bounds each exchange with Redis (default 3 s).
	OpTimeout time.Duration
	// Cache is how many live sessions a replica keeps after their calls
	// (default 8), so a session called again here, whose state nobody
	// changed since, is not loaded again. They count against the
	// Sandbox's WithMaxSessions.
	Cache int
	// Prefix begins every key (default "airlock:"), so replicas of
	// different services can share a Redis.
	Prefix string
	// Logger, if set, receives the Redis client's own messages (as
	// warnings) instead of its default, plain lines on stderr that would
	// break a JSON log. The client has one logger per process: the last
	// store made with a Logger sets it.
	Logger *slog.Logger
}

// redisLogger hands the Redis client's messages to a slog.Logger.
type redisLogger struct{ l *slog.Logger }

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	r.l.WarnContext(ctx, "redis client", slog.String("message", fmt.Sprintf(format, v...)))
}

// RedisStore keeps sessions in Redis, so that replicas sharing one
// continue each other's sessions. Each session is a hash (its saved
// state, a version counted up by each state change, its call count and
// times) expiring after the TTL, a lock key held through a call, and an
// entry in an index sorted by creation.
//
// At most one call runs on a session at a time, across replicas: a call
// takes the lock with SET NX and a lease, under a fencing token (a counter
// in Redis, rising with each call). Its new state is written only if the
// lock still holds its token and no later token wrote (one Lua script), so
// a replica that lost its lease, stalled or cut off, cannot overwrite a
// newer state; a replica that dies leaves the session as it was before the
// call, locked until the lease runs out.
type RedisStore struct {
	opts   RedisOptions
	client *redis.Client
	name   string

	mu    sync.Mutex
	cache map[string]cached
	order []string // cache keys, least recently stored first
}

type cached struct {
	ver  int64
	sess *airlock.Session
}

// NewRedisStore connects to the Redis at opts.URL (checking it answers).
func NewRedisStore(ctx context.Context, opts RedisOptions) (*RedisStore, error) {
	ro, err := redis.ParseURL(opts.URL)
	if err != nil {
		return nil, fmt.Errorf("session store: %w", err)
	}
	if opts.TTL == 0 {
		opts.TTL = airlock.DefaultSessionTTL
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = airlock.DefaultMaxSessions
	}
	if opts.Lease <= 0 {
		opts.Lease = DefaultRedisLease
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = DefaultRedisOpTimeout
	}
	if opts.Cache == 0 {
		opts.Cache = DefaultRedisCache
	}
	if opts.Prefix == "" {
		opts.Prefix = "airlock:"
	}
	// Every exchange is bounded, so a Redis that is down or hung fails a
	// request in seconds instead of holding it.
	ro.DialTimeout, ro.ReadTimeout, ro.WriteTimeout = opts.OpTimeout, opts.OpTimeout, opts.OpTimeout
	ro.PoolTimeout = opts.OpTimeout
	ro.ContextTimeoutEnabled = true
	// No retries: a retried write whose first try did land would be
	// refused by its own fence and reported as a lost lease.
	ro.MaxRetries = -1
	ro.DisableIdentity = true
	ro.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if opts.Logger != nil {
		redis.SetLogger(redisLogger{opts.Logger})
	}
	name := "redis://" + ro.Addr + "/" + strconv.Itoa(ro.DB)
	if ro.Network == "unix" {
		name = "redis+unix://" + ro.Addr + "?db=" + strconv.Itoa(ro.DB)
	}
	s := &RedisStore{opts: opts, client: redis.NewClient(ro), name: name, cache: map[string]cached{}}
	pctx, cancel := context.WithTimeout(ctx, opts.OpTimeout)
	defer cancel()
	if err := s.client.Ping(pctx).Err(); err != nil {
		s.client.Close()
		return nil, &StoreError{Store: name, Op: "ping", Err: err}
	}
	return s, nil
}

// Name is the store's address, without credentials.
func (s *RedisStore) Name() string { return s.name }

// Close closes the connections and the cached live sessions.
func (s *RedisStore) Close() error {
	s.mu.Lock()
	for _, c := range s.cache {
		c.sess.Close(context.Background())
	}
	s.cache, s.order = map[string]cached{}, nil
	s.mu.Unlock()
	return s.client.Close()
}

func (s *RedisStore) stateKey(id string) string { return s.opts.Prefix + "session:" + id }
func (s *RedisStore) lockKey(id string) string  { return s.opts.Prefix + "session:" + id + ":lock" }
func (s *RedisStore) indexKey() string          { return s.opts.Prefix + "sessions" }
func (s *RedisStore) fenceKey() string          { return s.opts.Prefix + "fence" }

// op bounds one exchange with Redis.
func (s *RedisStore) op(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.OpTimeout)
}

func (s *RedisStore) fail(op string, err error) error {
	return &StoreError{Store: s.name, Op: op, Err: err}
}

func (s *RedisStore) ttlMS() int64 {
	if s.opts.TTL < 0 {
		return 0
	}
	return s.opts.TTL.Milliseconds()
}

func newSessionID() string {
	var id [16]byte
	rand.Read(id[:])
	return hex.EncodeToString(id[:])
}

func nowMS() int64 { return time.Now().UnixMilli() }

// createScript stores a new session's state and indexes it.
// KEYS: state, index. ARGV: blob, created (ms), ttl (ms, 0: none), id.
var createScript = redis.NewScript(`
redis.call('HSET', KEYS[1], 'blob', ARGV[1], 'ver', 1, 'created', ARGV[2], 'calls', 0, 'fence', 0)
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[4])
return 1`)

// Create stores sess and closes it (the state is the store's now).
func (s *RedisStore) Create(ctx context.Context, sess *airlock.Session) (string, error) {
	defer sess.Close(ctx)
	var blob bytes.Buffer
	if err := sess.Save(&blob); err != nil {
		return "", fmt.Errorf("save session: %w", err)
	}
	if err := s.checkCap(ctx); err != nil {
		return "", err
	}
	id := newSessionID()
	octx, cancel := s.op(ctx)
	defer cancel()
	if err := createScript.Run(octx, s.client, []string{s.stateKey(id), s.indexKey()}, blob.Bytes(), nowMS(), s.ttlMS(), id).Err(); err != nil {
		return "", s.fail("create", err)
	}
	return id, nil
}

// checkCap refuses a new session at MaxSessions, after forgetting the
// index entries of sessions that expired.
func (s *RedisStore) checkCap(ctx context.Context) error {
	octx, cancel := s.op(ctx)
	defer cancel()
	n, err := s.client.ZCard(octx, s.indexKey()).Result()
	if err != nil {
		return s.fail("count sessions", err)
	}
	if n < int64(s.opts.MaxSessions) {
		return nil
	}
	if _, err := s.List(ctx); err != nil { // prunes
		return err
	}
	octx2, cancel2 := s.op(ctx)
	defer cancel2()
	if n, err = s.client.ZCard(octx2, s.indexKey()).Result(); err != nil {
		return s.fail("count sessions", err)
	}
	if n >= int64(s.opts.MaxSessions) {
		return fmt.Errorf("%w (%d in %s)", airlock.ErrTooManySessions, s.opts.MaxSessions, s.name)
	}
	return nil
}

// Scripts of a call. Each checks the lock still holds the call's token.
var (
	// KEYS: lock. ARGV: token, lease (ms).
	renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`)
	// KEYS: lock. ARGV: token.
	releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`)
	// commitScript writes a call's outcome: the new state if it advanced
	// (ARGV[3] = 1), the call count and time, the TTL from now. It
	// returns the state's version, -1 for a lost lock (or a later token
	// that already wrote: the fence), -2 for a deleted session.
	// KEYS: state, lock. ARGV: token, blob, advanced, ttl (ms), now (ms).
	commitScript = redis.NewScript(`
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return -1 end
if redis.call('EXISTS', KEYS[1]) == 0 then return -2 end
local fence = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
if tonumber(ARGV[1]) <= fence then return -1 end
if ARGV[3] == '1' then
  redis.call('HSET', KEYS[1], 'blob', ARGV[2])
  redis.call('HINCRBY', KEYS[1], 'ver', 1)
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'last_call', ARGV[5])
redis.call('HINCRBY', KEYS[1], 'calls', 1)
if tonumber(ARGV[4]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
return tonumber(redis.call('HGET', KEYS[1], 'ver'))`)
)

// Begin takes the session's lock and loads its state, from the replica's
// cache when the cached live session is at the stored version.
func (s *RedisStore) Begin(ctx context.Context, sb *airlock.Sandbox, id string, opts airlock.LoadOptions) (StoreCall, error) {
	octx, cancel := s.op(ctx)
	defer cancel()
	token, err := s.client.Incr(octx, s.fenceKey()).Result()
	if err != nil {
		return nil, s.fail("take a fencing token", err)
	}
	tok := strconv.FormatInt(token, 10)
	ok, err := s.client.SetNX(octx, s.lockKey(id), tok, s.opts.Lease).Result()
	if err != nil {
		return nil, s.fail("lock", err)
	}
	if !ok {
		n, err := s.client.Exists(octx, s.stateKey(id)).Result()
		if err != nil {
			return nil, s.fail("look up", err)
		}
		if n == 0 {
			return nil, fmt.Errorf("session %q: %w", id, ErrNoSession)
		}
		return nil, fmt.Errorf("session %q: %w", id, ErrSessionBusy)
	}
	c := &redisCall{s: s, id: id, token: tok, stop: make(chan struct{}), renewed: make(chan struct{})}
	go c.renew() // from now: loading a large state takes time too
	if err := c.load(ctx, sb, opts); err != nil {
		c.Release()
		return nil, err
	}
	return c, nil
}

type redisCall struct {
	s       *RedisStore
	id      string
	token   string
	sess    *airlock.Session
	ver     int64
	before  int // sess.Calls() before the call
	kept    bool
	stop    chan struct{}
	renewed chan struct{} // closed when renew returns
	once    sync.Once
}

func (c *redisCall) Session() *airlock.Session { return c.sess }

func (c *redisCall) load(ctx context.Context, sb *airlock.Sandbox, opts airlock.LoadOptions) error {
	s := c.s
	octx, cancel := s.op(ctx)
	defer cancel()
	verStr, err := s.client.HGet(octx, s.stateKey(c.id), "ver").Result()
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("session %q: %w", c.id, ErrNoSession)
	}
	if err != nil {
		return s.fail("read version", err)
	}
	c.ver, _ = strconv.ParseInt(verStr, 10, 64)
	if sess := s.takeCached(c.id, c.ver); sess != nil {
		c.sess, c.before = sess, sess.Calls()
		return nil
	}
	blob, err := s.client.HGet(octx, s.stateKey(c.id), "blob").Bytes()
	if errors.Is(err, redis.Nil) {
		return fmt.Errorf("session %q: %w", c.id, ErrNoSession)
	}
	if err != nil {
		return s.fail("read state", err)
	}
	sess, err := sb.LoadSession(ctx, bytes.NewReader(blob), opts)
	if errors.Is(err, airlock.ErrTooManySessions) && s.evict() {
		// The Sandbox's cap is full, partly of this store's cache.
		sess, err = sb.LoadSession(ctx, bytes.NewReader(blob), opts)
	}
	switch {
	case errors.Is(err, airlock.ErrTooManySessions):
		return err
	case err != nil:
		return &StateError{ID: c.id, Err: err}
	}
	c.sess, c.before = sess, sess.Calls()
	return nil
}

// renew extends the lease while the call runs.
func (c *redisCall) renew() {
	defer close(c.renewed)
	t := time.NewTicker(c.s.opts.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			ctx, cancel := c.s.op(context.Background())
			// A failed renewal is not fatal: the commit's fence decides.
			renewScript.Run(ctx, c.s.client, []string{c.s.lockKey(c.id)}, c.token, c.s.opts.Lease.Milliseconds())
			cancel()
		}
	}
}

func (c *redisCall) Commit(ctx context.Context, res *airlock.Result) error {
	s := c.s
	advanced := c.sess.Calls() != c.before
	var blob []byte
	flag := "0"
	if advanced {
		var b bytes.Buffer
		if err := c.sess.Save(&b); err != nil {
			return fmt.Errorf("save session %q: %w", c.id, err)
		}
		blob, flag = b.Bytes(), "1"
	}
	octx, cancel := s.op(ctx)
	defer cancel()
	ver, err := commitScript.Run(octx, s.client, []string{s.stateKey(c.id), s.lockKey(c.id)},
		c.token, blob, flag, s.ttlMS(), nowMS()).Int64()
	switch {
	case err != nil:
		return s.fail("store the call's state", err)
	case ver == -1:
		return fmt.Errorf("session %q: %w", c.id, ErrLeaseLost)
	case ver == -2:
		return fmt.Errorf("session %q: %w", c.id, ErrNoSession)
	}
	// The live session is the stored state at ver: kept for the next call.
	c.kept = s.putCached(c.id, ver, c.sess)
	return nil
}

func (c *redisCall) Release() {
	c.once.Do(func() {
		close(c.stop)
		<-c.renewed
		if !c.kept && c.sess != nil {
			c.sess.Close(context.Background()) // ahead of, or not, the stored state
		}
		ctx, cancel := c.s.op(context.Background())
		defer cancel()
		// If this fails the lease runs out by itself.
		releaseScript.Run(ctx, c.s.client, []string{c.s.lockKey(c.id)}, c.token)
	})
}

// takeCached removes and returns the live session cached for id if it is
// at version ver and live; a stale one is closed.
func (s *RedisStore) takeCached(id string, ver int64) *airlock.Session {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.cache[id]
	if !ok {
		return nil
	}
	s.dropLocked(id)
	if c.ver != ver || c.sess.Err() != nil {
		c.sess.Close(context.Background())
		return nil
	}
	return c.sess
}

func (s *RedisStore) putCached(id string, ver int64, sess *airlock.Session) bool {
	if s.opts.Cache < 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.cache[id]; ok {
		old.sess.Close(context.Background())
		s.dropLocked(id)
	}
	for len(s.order) >= s.opts.Cache {
		oldest := s.order[0]
		s.cache[oldest].sess.Close(context.Background())
		s.dropLocked(oldest)
	}
	s.cache[id] = cached{ver: ver, sess: sess}
	s.order = append(s.order, id)
	return true
}

func (s *RedisStore) dropLocked(id string) {
	delete(s.cache, id)
	if i := slices.Index(s.order, id); i >= 0 {
		s.order = slices.Delete(s.order, i, i+1)
	}
}

// evict closes the least recently stored cached session, if any.
func (s *RedisStore) evict() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.order) == 0 {
		return false
	}
	oldest := s.order[0]
	s.cache[oldest].sess.Close(context.Background())
	s.dropLocked(oldest)
	return true
}

// forkScript copies a session's state as a new session.
// KEYS: source state, new state, index. ARGV: created (ms), ttl (ms), id.
var forkScript = redis.NewScript(`
local blob = redis.call('HGET', KEYS[1], 'blob')
if not blob then return 0 end
redis.call('HSET', KEYS[2], 'blob', blob, 'ver', 1, 'created', ARGV[1], 'calls', 0, 'fence', 0)
if tonumber(ARGV[2]) > 0 then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
redis.call('ZADD', KEYS[3], ARGV[1], ARGV[3])
return 1`)

// Fork copies the session's stored state: that after its last finished
// call (a call running meanwhile is not waited for).
func (s *RedisStore) Fork(ctx context.Context, from string) (string, error) {
	if err := s.checkCap(ctx); err != nil {
		return "", err
	}
	id := newSessionID()
	octx, cancel := s.op(ctx)
	defer cancel()
	n, err := forkScript.Run(octx, s.client, []string{s.stateKey(from), s.stateKey(id), s.indexKey()}, nowMS(), s.ttlMS(), id).Int()
	if err != nil {
		return "", s.fail("fork", err)
	}
	if n == 0 {
		return "", fmt.Errorf("session %q: %w", from, ErrNoSession)
	}
	return id, nil
}

// Delete removes the session's state; a call running on it finishes, and
// its state is not stored (the commit finds the session gone).
func (s *RedisStore) Delete(ctx context.Context, id string) error {
	octx, cancel := s.op(ctx)
	defer cancel()
	n, err := s.client.Del(octx, s.stateKey(id)).Result()
	if err != nil {
		return s.fail("delete", err)
	}
	if err := s.client.ZRem(octx, s.indexKey(), id).Err(); err != nil {
		return s.fail("delete", err)
	}
	s.mu.Lock()
	if c, ok := s.cache[id]; ok {
		c.sess.Close(ctx)
		s.dropLocked(id)
	}
	s.mu.Unlock()
	if n == 0 {
		return fmt.Errorf("session %q: %w", id, ErrNoSession)
	}
	return nil
}

// List reads the index and each session's call count and times, and
// forgets the index entries of sessions that expired.
func (s *RedisStore) List(ctx context.Context) (SessionList, error) {
	octx, cancel := s.op(ctx)
	defer cancel()
	ids, err := s.client.ZRange(octx, s.indexKey(), 0, -1).Result()
	if err != nil {
		return SessionList{}, s.fail("list", err)
	}
	pipe := s.client.Pipeline()
	fields := make([]*redis.SliceCmd, len(ids))
	locks := make([]*redis.IntCmd, len(ids))
	for i, id := range ids {
		fields[i] = pipe.HMGet(octx, s.stateKey(id), "created", "calls", "last_call")
		locks[i] = pipe.Exists(octx, s.lockKey(id))
	}
	if len(ids) > 0 {
		if _, err := pipe.Exec(octx); err != nil {
			return SessionList{}, s.fail("list", err)
		}
	}
	out := SessionList{Sessions: make([]SessionStatus, 0, len(ids))}
	var gone []any
	for i, id := range ids {
		v := fields[i].Val()
		if len(v) != 3 || v[0] == nil {
			gone = append(gone, id)
			continue
		}
		st := SessionStatus{ID: id, Created: msTime(v[0]), Running: locks[i].Val() > 0}
		if c, ok := v[1].(string); ok {
			st.Calls, _ = strconv.Atoi(c)
		}
		if v[2] != nil {
			last := msTime(v[2])
			st.LastCall = &last
		}
		out.Sessions = append(out.Sessions, st)
	}
	if len(gone) > 0 {
		if err := s.client.ZRem(octx, s.indexKey(), gone...).Err(); err != nil {
			return SessionList{}, s.fail("list", err)
		}
	}
	slices.SortFunc(out.Sessions, func(a, b SessionStatus) int {
		return cmp.Or(a.Created.Compare(b.Created), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

func msTime(v any) time.Time {
	s, _ := v.(string)
	ms, _ := strconv.ParseInt(s, 10, 64)
	return time.UnixMilli(ms).UTC()
}
