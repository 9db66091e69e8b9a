package pkgindex

import (
	"testing"
)

// Whatever an index or a wheel says, parsing answers or errs: it never
// panics, loops or allocates without bound.
func FuzzIndexPages(f *testing.F) {
	f.Add([]byte(`{"meta":{"api-version":"1.1"},"files":[{"filename":"a-1.0-py3-none-any.whl","url":"a.whl","hashes":{"sha256":"00"},"yanked":"why"}]}`))
	f.Add([]byte(`<html><a href="/f/a-1.0-py3-none-any.whl#sha256=ab" data-yanked data-requires-python="&gt;=3.8">a-1.0-py3-none-any.whl</a></html>`))
	f.Add([]byte(`<a href='x'><b>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, fl := range [][]file{must(parseJSONPage(body)), must(parseHTMLPage(body))} {
			for _, x := range fl {
				parseWheelName(x.Filename)
				_, _ = ParseSpecifiers(x.RequiresPython)
			}
		}
	})
}

func must(fs []file, _ error) []file { return fs }

func FuzzRequirements(f *testing.F) {
	for _, s := range []string{`a[b,c] (>=1.0,!=1.2.*) ; python_version >= "3.8" and (sys_platform == "wasi" or extra == "x")`,
		"x==1.0.post1.dev2+local.7", "y ~= 2.2 ; platform_machine not in 'x86_64'", "((((", "z @ http://x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRequirement(s)
		if err != nil {
			return
		}
		r.Marker.Eval(WASIEnv("3.13.5"), []string{"x"})
		v, err := ParseVersion("1.2.3")
		if err == nil {
			r.Spec.Allows(v, false)
		}
	})
}

func FuzzWheel(f *testing.F) {
	f.Add([]byte("PK\x05\x06" + string(make([]byte, 18))))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, _ := ParseVersion("1.0")
		_, _ = checkWheel(data, "a", v, "a-1.0-py3-none-any.whl")
		parseMetadata(data)
	})
}
