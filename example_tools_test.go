package airlock_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/airlock-sandbox/airlock"
	"github.com/airlock-sandbox/airlock/hostfuncs"
)

type lookupArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit,omitempty"`
}

func ExampleWithTools() {
	ctx := context.Background()
	catalogue := []string{"desk lamp", "floor lamp", "lamp shade", "chair"}
	lookup := hostfuncs.Func("lookup", "Search the catalogue; at most limit results.",
		func(ctx context.Context, in lookupArgs) ([]string, error) {
			if in.Query == "" {
				return nil, fmt.Errorf("empty query")
			}
			info, _ := hostfuncs.CallInfo(ctx) // the run id and the Request's Values
			var out []string
			for _, item := range catalogue {
				if strings.Contains(item, in.Query) && (in.Limit == 0 || len(out) < in.Limit) {
					out = append(out, item+" for "+info.Values["user"].(string))
				}
			}
			return out, nil
		})
	sb, err := airlock.New(ctx, airlock.WithHostFuncs(lookup))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sb.Close(ctx)

	res, err := sb.Run(ctx, airlock.Request{
		Code: `
import airlock
print(airlock.tools.lookup("lamp", limit=2))
try:
    airlock.tools.lookup("")
except airlock.HostError as e:
    print("error:", e)
`,
		Values: map[string]any{"user": "ann"},
	})
	if err != nil {
		fmt.Println("sandbox error:", err)
		return
	}
	fmt.Print(string(res.Stdout))
	// Output:
	// ['desk lamp for ann', 'floor lamp for ann']
	// error: empty query
}
