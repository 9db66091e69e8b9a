package memfs_test

import (
	"errors"
	"fmt"

	"github.com/airlock-sandbox/airlock/wasi/errno"
	"github.com/airlock-sandbox/airlock/wasi/memfs"
)

// The host puts files in before a run and takes results out after it;
// the quota bounds what a guest can make, and its refusals are the errnos
// the guest would see.
func Example() {
	fs := memfs.New(memfs.Options{Quota: memfs.Quota{MaxBytes: 16, MaxInodes: 10}})
	if err := fs.WriteFile("/home/user/in.txt", []byte("hello")); err != nil {
		fmt.Println(err)
	}
	data, _ := fs.ReadFile("/home/user/in.txt")
	fmt.Printf("%s\n", data)

	err := fs.WriteFile("/home/user/big.bin", make([]byte, 64))
	fmt.Println(errors.Is(err, errno.ENOSPC), fs.QuotaHit())

	_, err = fs.Lookup(fs.Root(), "../../etc/passwd")
	fmt.Println(errors.Is(err, errno.ENOENT))
	// Output:
	// hello
	// true true
	// true
}
