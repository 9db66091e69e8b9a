package wire_test

import (
	"encoding/json"
	"fmt"

	"github.com/airlock-sandbox/airlock/server/wire"
)

// A client builds a request and reads a result with no more than this
// package: the JSON is the API's.
func Example() {
	body, _ := json.Marshal(wire.RunRequest{
		Code:   "print(open('in.txt').read().upper())",
		Files:  wire.InputFiles{"in.txt": []byte("hi")},
		Limits: wire.RunLimits{TimeoutMS: 2000},
	})
	fmt.Println(string(body))

	var res wire.Result
	_ = json.Unmarshal([]byte(`{"exit_code":0,"stdout":"HI\n","stderr":"","error":null,"duration_ms":21.7,"files":[]}`), &res)
	fmt.Printf("%q in %v\n", res.Stdout, wire.Duration(res.DurationMS))
	// Output:
	// {"code":"print(open('in.txt').read().upper())","files":{"in.txt":"aGk="},"limits":{"timeout_ms":2000}}
	// "HI\n" in 21.7ms
}
