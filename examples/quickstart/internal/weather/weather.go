package weather

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Version is the version the server reports.
const Version = "1.0.0"

// NewServer returns the weather server with its five tools. Each call
// returns a new, independent server.
func NewServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "weather", Version: Version}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "wx_forecast", Description: "Forecast."}, forecast)
	mcp.AddTool(s, &mcp.Tool{Name: "wx_now", Description: "Conditions."}, current)
	mcp.AddTool(s, &mcp.Tool{Name: "wx_alerts", Description: "Alerts."}, regionAlerts)
	mcp.AddTool(s, &mcp.Tool{Name: "wx_convert", Description: "Convert.", InputSchema: convertSchema()}, convert)
	mcp.AddTool(s, &mcp.Tool{Name: "wx_cities", Description: "Cities."}, listCities)
	return s
}

// ForecastInput is the input of wx_forecast.
type ForecastInput struct {
	City string `json:"city"`
	Days int    `json:"days,omitempty"`
}

// CityInput is the input of wx_now.
type CityInput struct {
	City string `json:"city"`
}

// RegionInput is the input of wx_alerts.
type RegionInput struct {
	Region string `json:"region"`
}

// ConvertInput is the input of wx_convert.
type ConvertInput struct {
	Value float64 `json:"value"`
	From  string  `json:"from"`
	To    string  `json:"to"`
}

// convertSchema is written out because the unit enums cannot be given with
// struct tags.
func convertSchema() json.RawMessage {
	return json.RawMessage(`{
	"type": "object",
	"properties": {
		"value": {"type": "number"},
		"from": {"type": "string", "enum": ["celsius", "fahrenheit", "kelvin"]},
		"to": {"type": "string", "enum": ["celsius", "fahrenheit", "kelvin"]}
	},
	"required": ["value", "from", "to"],
	"additionalProperties": false
}`)
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// findCity looks a city up by name, ignoring case and surrounding space.
func findCity(name string) (city, error) {
	all := cities()
	for _, c := range all {
		if strings.EqualFold(c.name, strings.TrimSpace(name)) {
			return c, nil
		}
	}
	names := make([]string, len(all))
	for i, c := range all {
		names[i] = c.name
	}
	return city{}, fmt.Errorf("unknown city %q; known cities: %s", name, strings.Join(names, ", "))
}

func forecast(_ context.Context, _ *mcp.CallToolRequest, in ForecastInput) (*mcp.CallToolResult, any, error) {
	c, err := findCity(in.City)
	if err != nil {
		return nil, nil, err
	}
	days := in.Days
	if days == 0 {
		days = 3
	}
	if days < 1 || days > len(c.forecast) {
		return nil, nil, fmt.Errorf("days must be between 1 and %d, not %d", len(c.forecast), days)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Forecast for %s, next %d days:", c.name, days)
	for i, d := range c.forecast[:days] {
		label := fmt.Sprintf("Day %d", i+1)
		switch i {
		case 0:
			label = "Today"
		case 1:
			label = "Tomorrow"
		}
		fmt.Fprintf(&b, "\n%s: %s, high %d°C, low %d°C, precipitation %d%%", label, d.sky, d.highC, d.lowC, d.precip)
	}
	return text(b.String()), nil, nil
}

func current(_ context.Context, _ *mcp.CallToolRequest, in CityInput) (*mcp.CallToolResult, any, error) {
	c, err := findCity(in.City)
	if err != nil {
		return nil, nil, err
	}
	n := c.now
	return text(fmt.Sprintf("%s at %s: %s, %d°C (feels like %d°C), humidity %d%%, wind %d km/h from the %s.",
		c.name, n.updatedAt, n.sky, n.tempC, n.feelsC, n.humidity, n.windKmh, n.windFrom)), nil, nil
}

func regionAlerts(_ context.Context, _ *mcp.CallToolRequest, in RegionInput) (*mcp.CallToolResult, any, error) {
	region := strings.TrimSpace(in.Region)
	region = strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(region, "the "), "The "))
	var known []string
	for _, a := range alerts() {
		if strings.EqualFold(a.region, region) {
			return text(fmt.Sprintf("Active alerts for %s: %s", a.region, a.text)), nil, nil
		}
		known = append(known, a.region)
	}
	return text(fmt.Sprintf("No active alerts for %s. Regions with active alerts: %s.", region, strings.Join(known, ", "))), nil, nil
}

func convert(_ context.Context, _ *mcp.CallToolRequest, in ConvertInput) (*mcp.CallToolResult, any, error) {
	kelvin, err := toKelvin(in.Value, in.From)
	if err != nil {
		return nil, nil, err
	}
	if kelvin < 0 {
		return nil, nil, fmt.Errorf("%s %s is below absolute zero", formatNumber(in.Value), in.From)
	}
	out, err := fromKelvin(kelvin, in.To)
	if err != nil {
		return nil, nil, err
	}
	return text(fmt.Sprintf("%s %s = %s %s", formatNumber(in.Value), in.From, formatNumber(out), in.To)), nil, nil
}

func toKelvin(v float64, unit string) (float64, error) {
	switch unit {
	case "celsius":
		return v + 273.15, nil
	case "fahrenheit":
		return (v-32)*5/9 + 273.15, nil
	case "kelvin":
		return v, nil
	}
	return 0, fmt.Errorf("unknown unit %q (use celsius, fahrenheit or kelvin)", unit)
}

func fromKelvin(k float64, unit string) (float64, error) {
	switch unit {
	case "celsius":
		return k - 273.15, nil
	case "fahrenheit":
		return (k-273.15)*9/5 + 32, nil
	case "kelvin":
		return k, nil
	}
	return 0, fmt.Errorf("unknown unit %q (use celsius, fahrenheit or kelvin)", unit)
}

// formatNumber rounds to two decimals and drops trailing zeros.
func formatNumber(v float64) string {
	v = math.Round(v*100) / 100
	if v == 0 {
		v = 0 // no "-0"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

func listCities(_ context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
	var b strings.Builder
	b.WriteString("Cities with weather data:")
	for _, c := range cities() {
		fmt.Fprintf(&b, "\n%s (%s)", c.name, c.now.sky)
	}
	return text(b.String()), nil, nil
}
