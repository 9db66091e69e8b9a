package python

import (
	_ "embed"
	"strings"
)

// guestModule is the source of the guest module `airlock` (host tools).
//
//go:embed airlock.py
var guestModule string

// refusals defines _airlock_refuse, which the prelude calls first: the
// errors that say what the sandbox refuses (network, processes, threads,
// installing packages).
//
//go:embed refusals.py
var refusals string

// netModule is the source of the guest module `_airlock_net`: HTTP(S)
// through the host for runs with a network allow-list (prelude.py enables
// it when AIRLOCK_NET=1).
//
//go:embed airlock_net.py
var netModule string

// command is the -c text: a finder that compiles `airlock` from
// guestModule on its first import (the prelude imports it into the
// snapshot image, where rich output needs it), the refusals, then the
// prelude. The refusals compile under a
// file name of their own, so that a traceback through them says where it
// is ("<airlock sandbox>") rather than showing a line of the prelude's
// "<string>", a name the run's own code may have too.
var command = guestFinder() +
	"exec(compile(" + pyBytes(refusals) + ", \"<airlock sandbox>\", \"exec\", dont_inherit=True))\n" +
	prelude

func guestFinder() string {
	return `import sys
class _AirlockFinder:
    _src = {"airlock": ` + pyBytes(guestModule) + `, "_airlock_net": ` + pyBytes(netModule) + `}
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name in cls._src:
            return type(sys.__spec__)(name, cls, origin="<" + name + ">")
    @classmethod
    def create_module(cls, spec):
        return None
    @classmethod
    def exec_module(cls, module):
        name = module.__spec__.name
        exec(compile(cls._src[name], "<" + name + ">", "exec", dont_inherit=True), module.__dict__)
    @classmethod
    def get_source(cls, name):
        return cls._src[name].decode("utf-8")
sys.meta_path.insert(0, _AirlockFinder)
del _AirlockFinder
`
}

// pyBytes renders s as a Python bytes literal of printable ASCII.
func pyBytes(s string) string {
	var b strings.Builder
	b.WriteString("b'")
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' || c == '\'':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c >= 0x20 && c < 0x7f:
			b.WriteByte(c)
		default:
			const hex = "0123456789abcdef"
			b.WriteString(`\x`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	b.WriteString("'")
	return b.String()
}
