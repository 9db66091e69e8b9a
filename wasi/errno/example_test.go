package errno_test

import (
	"errors"
	"fmt"

	"github.com/airlock-sandbox/airlock/wasi/errno"
)

// A failure reaches the guest as its WASI number: an Errno as itself, any
// other error as EIO, never as success.
func ExampleOf() {
	fmt.Println(uint16(errno.Of(errno.ENOENT)))
	fmt.Println(errno.Of(errors.New("disk on fire")) == errno.EIO, errno.Of(nil) == errno.ESUCCESS)
	// Output:
	// 44
	// true true
}
