package hostfuncs_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/airlock-sandbox/airlock/hostfuncs"
)

type weatherArgs struct {
	City string `json:"city"`
	Days int    `json:"days,omitempty"`
}

// A host function is a typed Go function; its JSON schema, which the
// guest's airlock.tools and MCP's tool list describe, comes from In.
// A sandbox takes functions with airlock.WithTools.
func Example() {
	forecast := hostfuncs.Func("forecast", "The forecast for a city.",
		func(ctx context.Context, in weatherArgs) (string, error) {
			return fmt.Sprintf("%s: sun for %d days", in.City, max(in.Days, 1)), nil
		})
	reg, err := hostfuncs.NewRegistry(forecast)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(reg.Names(), forecast.Description())
	fmt.Println(string(forecast.Schema()))

	// A name Python cannot call is refused when the registry is made.
	_, err = hostfuncs.NewRegistry(hostfuncs.Func("not-a-name", "", func(context.Context, string) (string, error) { return "", nil }))
	fmt.Println(errors.Is(err, hostfuncs.ErrInvalidFunc))
	// Output:
	// [forecast] The forecast for a city.
	// {"additionalProperties":false,"properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"],"type":"object"}
	// true
}
