package python_test

import (
	"errors"
	"fmt"

	"github.com/airlock-sandbox/airlock/python"
)

// A bundle is checked whole before anything of it is used: what is not
// one is refused with an error a caller can test for.
func Example() {
	_, err := python.LoadBundle([]byte("not a bundle"))
	fmt.Println(errors.Is(err, python.ErrBundleFormat))

	// A run's environment is the build's defaults with the caller's on top.
	env := python.MergeEnv([]string{"HOME=/home/user", "LANG=C.UTF-8"}, map[string]string{"LANG": "en_GB.UTF-8", "MODE": "test"})
	fmt.Println(env)
	// Output:
	// true
	// [HOME=/home/user LANG=en_GB.UTF-8 MODE=test]
}
