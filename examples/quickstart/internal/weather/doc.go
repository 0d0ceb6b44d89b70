// Package weather is the quickstart's MCP server: five weather tools over
// canned data for eight cities and three alert regions. Nothing is fetched
// and nothing is random, so the same call always gives the same answer and
// an eval's expectations can name exact numbers.
//
// Its tool names and descriptions are deliberately terse, the way many real
// servers ship ("wx_now": "Conditions."). The quickstart eval measures how
// much better a model does when the descriptions say what each tool is for.
//
// Tools:
//
//   - wx_forecast {city, days?}: a daily forecast, 1 to 7 days (default 3).
//   - wx_now {city}: the current conditions.
//   - wx_alerts {region}: the active weather alerts of a region.
//   - wx_convert {value, from, to}: a temperature in celsius, fahrenheit
//     or kelvin, converted.
//   - wx_cities {}: the cities with data.
//
// An unknown city gives a tool error (IsError) that lists the known ones.
package weather
