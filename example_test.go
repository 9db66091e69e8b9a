package airlock_test

import (
	"context"
	"fmt"

	"github.com/airlock-sandbox/airlock"
)

func Example() {
	ctx := context.Background()
	sb, err := airlock.New(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close(ctx)

	res, err := sb.Run(ctx, airlock.Request{
		Code:  "import sys\nname = sys.stdin.read().strip()\nprint(f'hello, {name}')\nopen('out.txt', 'w').write(name)",
		Stdin: []byte("agent\n"),
	})
	if err != nil {
		fmt.Println("sandbox error:", err)
		return
	}
	fmt.Print(string(res.Stdout))
	fmt.Println(res.ExitCode, res.Files[0].Path, string(res.Files[0].Data))
	// Output:
	// hello, agent
	// 0 /home/user/out.txt agent
}
