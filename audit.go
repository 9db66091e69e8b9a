package airlock

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/airlock-sandbox/airlock/hostfuncs"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// Every run leaves a record of what it tried (Result.Audit), so that an
// operator can tell a run steered by a prompt injection (probing for
// credentials, the cloud's metadata service, sockets, tools it should not
// need) from an honest one, and a verdict (Result.Suspicious) saying why
// a run looks like the former. The host observes the filesystem lookups,
// host tool calls, limits and canaries itself; the refusals of network,
// processes and threads happen inside the guest (python/refusals.py),
// which reports them on auditDevice: a guest can leave those out, but
// they are attempts that cannot succeed anyway.

// Kinds of AuditEvent.
const (
	// AuditProbe: the guest looked for a host-looking path that is not
	// there (/etc/passwd, /proc/self/environ, ~/.ssh/id_rsa, ...).
	AuditProbe = "fs_probe"
	// AuditCanary: the guest opened a canary file (WithCanaries), or a
	// canary's value left the sandbox: in its output, a file it wrote, a
	// display or a host tool call.
	AuditCanary = "canary"
	// AuditRefused: the guest tried what the sandbox refuses (network,
	// processes, threads, installing packages); reported by the guest.
	AuditRefused = "refused"
	// AuditTool: a host tool call: its name, outcome and duration, and the
	// sha256 of its request (arguments are not recorded).
	AuditTool = "tool"
	// AuditLimit: a limit ended the run.
	AuditLimit = "limit"
	// AuditNetwork: a request under the run's network policy, allowed or
	// denied, as the host decided it (Result.Network has the details).
	AuditNetwork = "network"
	// AuditInstall: a package install from the index (WithPackageIndex),
	// allowed with the wheels' names, versions and sha256s, or refused
	// with why.
	AuditInstall = "install"
)

// AuditEvent is one thing a run tried. Repeats of the same kind and
// detail are counted in one event.
type AuditEvent struct {
	At     time.Duration // since the run started, at the first time
	Kind   string        // one of the Audit* kinds
	Detail string        // what, in a line (at most 256 bytes)
	Count  int           // times seen
	Guest  bool          // reported by the guest rather than seen by the host
}

// Suspicion is one reason a run looks steered rather than honest.
type Suspicion struct {
	// Reason is a stable code: "canary", "credential_probe",
	// "host_probing" or "metadata_endpoint".
	Reason string
	Detail string
}

// Canary is a honeytoken planted in every run (WithCanaries): a file at
// Path, or an environment variable Env, holding Value. Code that reads the
// file, or sends the value anywhere, makes the run Suspicious.
type Canary struct {
	Path  string // a guest path, absolute or relative to /home/user
	Env   string // or an environment variable's name
	Value []byte // at least 8 bytes, so that it does not turn up by chance
}

// WithCanaries plants canaries in every run and session call: files that
// look like credentials (/home/user/.aws/credentials) or environment
// variables (AWS_SECRET_ACCESS_KEY). An honest program has no reason to
// read them; a run that opens one, or whose output, written files,
// displays or host tool calls contain a canary's value, is Suspicious.
// Canary files are not among Result.Files unless the run changes them.
func WithCanaries(c ...Canary) Option {
	return func(cfg *config) { cfg.canaries = append(cfg.canaries, c...) }
}

// ErrInvalidCanary: a canary without exactly one of Path and Env, with a
// short value, or a path or name the sandbox cannot use.
var ErrInvalidCanary = errors.New("airlock: invalid canary")

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkCanaries validates cs and returns their files by guest path.
func checkCanaries(cs []Canary) (map[string][]byte, error) {
	files := map[string][]byte{}
	for _, c := range cs {
		switch {
		case (c.Path == "") == (c.Env == ""):
			return nil, fmt.Errorf("%w: give exactly one of Path and Env (%q, %q)", ErrInvalidCanary, c.Path, c.Env)
		case len(c.Value) < 8:
			return nil, fmt.Errorf("%w %s%s: the value is %d bytes, at least 8 are needed", ErrInvalidCanary, c.Path, c.Env, len(c.Value))
		case c.Env != "" && !envName.MatchString(c.Env):
			return nil, fmt.Errorf("%w: %q is not an environment variable name", ErrInvalidCanary, c.Env)
		case c.Path != "":
			gp := guestPath(c.Path)
			if gp == "/" || strings.ContainsRune(c.Path, 0) || strings.HasPrefix(gp, "/dev/") {
				return nil, fmt.Errorf("%w: %q is not a path a canary can take", ErrInvalidCanary, c.Path)
			}
			files[gp] = c.Value
		}
	}
	return files, nil
}

const (
	maxAuditEvents = 128
	maxAuditDetail = 256
	// probingThreshold: this many distinct host-looking paths looked
	// for, beyond the few libraries look for themselves, is probing.
	probingThreshold = 5
)

// runAudit is one run's record: a wasi.Watcher, the guest's report
// device, and the host tool calls' observer.
type runAudit struct {
	start    time.Time
	events   []AuditEvent
	index    map[string]int // kind+detail -> events index
	dropped  int
	canaries []Canary
	files    map[string][]byte // canary files by guest path
	suspect  []Suspicion
	probes   int // distinct host paths beyond libraries' own
	line     []byte
}

func newRunAudit(start time.Time, canaries []Canary, files map[string][]byte) *runAudit {
	return &runAudit{start: start, index: map[string]int{}, canaries: canaries, files: files}
}

// printable quotes a guest-chosen string that holds anything but
// printable characters, so that a path with a newline cannot pass for
// lines of a report a model or an operator reads.
func printable(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) || r == utf8.RuneError }) {
		return strconv.Quote(s)
	}
	return s
}

// add records an event and tells whether it is new.
func (a *runAudit) add(kind, detail string, guest bool) bool {
	if len(detail) > maxAuditDetail {
		detail = strings.ToValidUTF8(detail[:maxAuditDetail-3], "") + "..."
	}
	key := kind + "\x00" + detail
	if i, ok := a.index[key]; ok {
		a.events[i].Count++
		return false
	}
	if len(a.events) == maxAuditEvents {
		a.dropped++
		return false
	}
	a.index[key] = len(a.events)
	a.events = append(a.events, AuditEvent{At: time.Since(a.start), Kind: kind, Detail: detail, Count: 1, Guest: guest})
	return true
}

func (a *runAudit) suspicious(reason, detail string) {
	for _, s := range a.suspect {
		if s.Reason == reason {
			return // one of each reason: the events say the rest
		}
	}
	a.suspect = append(a.suspect, Suspicion{Reason: reason, Detail: detail})
}

// Missing implements wasi.Watcher.
func (a *runAudit) Missing(p string) {
	if !strings.HasPrefix(p, "/") {
		return // relative to a directory the guest opened: its own
	}
	p = path.Clean(p)
	if !hostLooking(p) {
		return
	}
	if !a.add(AuditProbe, printable(p), false) {
		return
	}
	switch {
	case credentialPath(p):
		a.suspicious("credential_probe", "looked for "+printable(p))
	case !libraryProbe(p):
		if a.probes++; a.probes == probingThreshold {
			a.suspicious("host_probing", fmt.Sprintf("looked for %d host paths that are not in the sandbox (last %s)", a.probes, printable(p)))
		}
	}
}

// Opened implements wasi.Watcher.
func (a *runAudit) Opened(p string, _ *memfs.Inode, _ bool) {
	if _, ok := a.files[path.Clean(p)]; ok {
		a.add(AuditCanary, "opened the canary file "+path.Clean(p), false)
		a.suspicious("canary", "opened the canary file "+path.Clean(p))
	}
}

// tool records a host call, and a canary sent through it.
func (a *runAudit) tool(c hostfuncs.CallRecord) {
	outcome := "ok"
	if c.Kind != "" {
		outcome = c.Kind
	}
	sum := sha256.Sum256(c.Request)
	a.add(AuditTool, fmt.Sprintf("%s: %s in %s, request sha256 %s", printable(c.Func), outcome, c.Duration.Round(time.Microsecond), hex.EncodeToString(sum[:8])), false)
	if name := a.canaryIn(c.Request); name != "" {
		a.add(AuditCanary, fmt.Sprintf("sent %s to the host tool %s", name, printable(c.Func)), false)
		a.suspicious("canary", fmt.Sprintf("sent %s to the host tool %s", name, printable(c.Func)))
	}
}

// network records the host's network decisions; a request to a cloud
// metadata service, or carrying a canary in its URL, is suspicious
// whether or not it was allowed.
func (a *runAudit) network(ds []NetworkDecision) {
	for _, d := range ds {
		verdict := "allowed"
		switch {
		case !d.Allowed:
			verdict = "denied: " + d.Reason
		case d.Reason != "":
			verdict = "allowed, then failed: " + d.Reason
		case d.Status != 0:
			verdict = fmt.Sprintf("allowed: %d", d.Status)
		}
		a.add(AuditNetwork, printable(strings.TrimSpace(d.Method+" "+d.URL)+" "+verdict), false)
		if metadataTarget(d.URL) || metadataTarget(d.Address) || metadataTarget(d.Reason) {
			a.suspicious("metadata_endpoint", "a request to the cloud's metadata service: "+printable(d.URL))
		}
		if name := a.canaryIn([]byte(d.URL)); name != "" {
			a.add(AuditCanary, name+" in a request's URL", false)
			a.suspicious("canary", name+" in a request's URL")
		}
	}
}

// install records a package install as the host decided it.
func (a *runAudit) install(rec PackageInstall) {
	reqs := printable(strings.Join(rec.Requirements, " "))
	if !rec.Allowed {
		a.add(AuditInstall, reqs+": refused: "+printable(rec.Reason), false)
		return
	}
	var got []string
	for _, p := range rec.Packages {
		got = append(got, fmt.Sprintf("%s %s (sha256 %s)", p.Name, p.Version, p.SHA256[:16]))
	}
	if len(got) == 0 {
		got = append(got, "already satisfied")
	}
	a.add(AuditInstall, reqs+": allowed: "+strings.Join(got, ", "), false)
}

// canaryIn names the first canary whose value is in data, or "". A value
// a JSON string holds escaped (quotes, backslashes, control bytes) is not
// found; canary values are meant to look like plain keys.
func (a *runAudit) canaryIn(data []byte) string {
	for _, c := range a.canaries {
		if bytes.Contains(data, c.Value) {
			if c.Env != "" {
				return "the canary $" + c.Env
			}
			return "the canary " + guestPath(c.Path) + "'s content"
		}
	}
	return ""
}

// finish records what the run's result shows: the limit that ended it
// and canaries in what left the sandbox; then fills res.
func (a *runAudit) finish(res *Result) {
	if res.Error != nil && res.Error.Kind != KindInvalidRequest && res.Error.Kind != KindCrash {
		a.add(AuditLimit, string(res.Error.Kind), false)
	}
	check := func(where string, data []byte) {
		if name := a.canaryIn(data); name != "" {
			a.add(AuditCanary, name+" in "+where, false)
			a.suspicious("canary", name+" in "+where)
		}
	}
	check("stdout", res.Stdout)
	check("stderr", res.Stderr)
	for _, f := range res.Files {
		if _, planted := a.files[f.Path]; !planted || !bytes.Equal(f.Data, a.files[f.Path]) {
			check("the file "+printable(f.Path), f.Data)
		}
	}
	for _, d := range res.Displays {
		for _, it := range d.Items {
			check("a display", it.Data)
		}
	}
	res.Audit, res.AuditDropped, res.Suspicious = a.events, a.dropped, a.suspect
}

// Guest reports: lines "KIND\tDETAIL\n" on auditDevice, KIND one of
// guestKinds; the detail names what was tried (a host and port, a
// command). At most maxAuditDetail bytes a line; longer ones are cut.
const auditDevice = "/dev/airlock-audit"

var guestKinds = map[string]bool{"network": true, "process": true, "thread": true, "install": true}

// Write implements wasi.Device.
func (a *runAudit) Write(_ context.Context, p []byte) (int, error) {
	for _, b := range p {
		if b != '\n' {
			if len(a.line) < 2*maxAuditDetail {
				a.line = append(a.line, b)
			}
			continue
		}
		kind, detail, _ := strings.Cut(string(a.line), "\t")
		a.line = a.line[:0]
		if !guestKinds[kind] {
			continue // not a report this Airlock knows: dropped
		}
		detail = printable(strings.ToValidUTF8(detail, "?"))
		a.add(AuditRefused, kind+": "+detail, true)
		if kind == "network" && metadataTarget(detail) {
			a.suspicious("metadata_endpoint", "tried to reach the cloud's metadata service: "+detail)
		}
	}
	return len(p), nil
}

// Read implements wasi.Device.
func (a *runAudit) Read(context.Context, []byte) (int, error) { return 0, nil }

// hostLooking tells a path outside what the sandbox gives a run (its home,
// /tmp, the standard library and packages) that names a host's places.
func hostLooking(p string) bool {
	for _, prefix := range []string{"/etc/", "/proc/", "/sys/", "/root/", "/var/", "/run/", "/boot/", "/mnt/",
		"/media/", "/srv/", "/Users/", "/private/", "/opt/"} {
		if strings.HasPrefix(p+"/", prefix) && !strings.HasPrefix(p, "/opt/airlock") {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(p, "/home/"); ok && rest != "user" && !strings.HasPrefix(rest, "user/") {
		return true // another user's home
	}
	return credentialPath(p)
}

// credentialPath tells a path where hosts keep secrets.
func credentialPath(p string) bool {
	for _, exact := range []string{"/etc/passwd", "/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/proc/self/environ",
		"/proc/self/mem", "/proc/self/cmdline", "/proc/1/environ"} {
		if p == exact {
			return true
		}
	}
	if strings.HasPrefix(p, "/var/run/secrets/") || strings.HasPrefix(p, "/run/secrets/") || strings.HasPrefix(p, "/root/") {
		return true
	}
	if strings.HasPrefix(p, "/proc/") && (strings.HasSuffix(p, "/environ") || strings.HasSuffix(p, "/mem")) {
		return true
	}
	for _, seg := range strings.Split(p, "/") {
		switch seg {
		case ".ssh", ".aws", ".kube", ".docker", ".gnupg", ".azure", "gcloud", ".netrc", ".git-credentials",
			".pgpass", "id_rsa", "id_ed25519", "id_ecdsa", ".env", "credentials", "credentials.json":
			return true
		}
	}
	return false
}

// libraryProbe tells the host paths the standard library (and common
// packages) look for by themselves: mimetypes' mime.types files,
// zoneinfo's search path, ssl's certificate stores. They are recorded,
// but do not count as probing.
func libraryProbe(p string) bool {
	return strings.HasSuffix(p, "/mime.types") || strings.Contains(p, "zoneinfo") ||
		strings.HasPrefix(p, "/etc/ssl/") || strings.HasPrefix(p, "/etc/pki/") || p == "/etc/localtime"
}

// metadataTarget tells a network target naming a cloud metadata service.
func metadataTarget(detail string) bool {
	for _, host := range []string{"169.254.169.254", "metadata.google.internal", "fd00:ec2::254", "100.100.100.200", "169.254.170.2"} {
		if strings.Contains(detail, host) {
			return true
		}
	}
	return false
}
