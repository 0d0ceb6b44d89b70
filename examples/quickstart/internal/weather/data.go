package weather

// now is the current weather of one city.
type now struct {
	sky       string
	tempC     int
	feelsC    int
	humidity  int // percent
	windKmh   int
	windFrom  string
	updatedAt string // local time of the observation
}

// day is one day of a forecast.
type day struct {
	sky    string
	highC  int
	lowC   int
	precip int // chance of precipitation, percent
}

// city is the canned weather of one city.
type city struct {
	name     string
	now      now
	forecast [7]day
}

// cities returns the canned data, sorted by name. It is a function rather
// than a package variable so that no handler can change what another sees.
func cities() []city {
	return []city{
		{"Cairo", now{"sunny", 34, 33, 18, 14, "N", "14:00"}, [7]day{
			{"sunny", 35, 22, 0}, {"sunny", 36, 23, 0}, {"hazy sunshine", 37, 24, 0}, {"sunny", 35, 23, 0},
			{"dust storm", 33, 22, 5}, {"sunny", 34, 21, 0}, {"sunny", 35, 22, 0},
		}},
		{"Lisbon", now{"sunny", 22, 23, 55, 12, "NW", "13:00"}, [7]day{
			{"sunny", 24, 16, 0}, {"partly cloudy", 23, 16, 10}, {"showers", 20, 15, 60}, {"sunny", 23, 15, 5},
			{"sunny", 25, 17, 0}, {"partly cloudy", 24, 17, 10}, {"cloudy", 22, 16, 20},
		}},
		{"Nairobi", now{"partly cloudy", 24, 24, 48, 10, "E", "15:00"}, [7]day{
			{"partly cloudy", 25, 13, 20}, {"thunderstorms", 23, 14, 70}, {"partly cloudy", 25, 13, 20}, {"sunny", 26, 12, 5},
			{"thunderstorms", 22, 14, 75}, {"cloudy", 23, 13, 40}, {"sunny", 26, 12, 5},
		}},
		{"New York", now{"overcast", 15, 13, 70, 20, "SW", "08:00"}, [7]day{
			{"overcast", 16, 9, 30}, {"rain", 13, 8, 85}, {"windy", 12, 6, 20}, {"sunny", 17, 8, 0},
			{"sunny", 19, 10, 0}, {"thunderstorms", 21, 14, 65}, {"partly cloudy", 18, 11, 15},
		}},
		{"Oslo", now{"light rain", 8, 5, 88, 18, "SW", "14:00"}, [7]day{
			{"rain", 9, 4, 90}, {"rain", 8, 3, 80}, {"showers", 10, 4, 60}, {"cloudy", 11, 5, 30},
			{"rain", 9, 5, 70}, {"partly cloudy", 12, 6, 20}, {"sunny", 13, 6, 10},
		}},
		{"Reykjavik", now{"snow showers", -2, -8, 80, 30, "N", "12:00"}, [7]day{
			{"snow", 0, -5, 80}, {"snow showers", -1, -6, 70}, {"cloudy", 1, -3, 30}, {"snow", 0, -4, 90},
			{"clear", -3, -9, 5}, {"windy", 1, -2, 20}, {"snow showers", 0, -4, 60},
		}},
		{"Sydney", now{"clear", 27, 28, 62, 16, "SE", "23:00"}, [7]day{
			{"sunny", 28, 19, 5}, {"sunny", 29, 20, 0}, {"thunderstorms", 26, 20, 70}, {"partly cloudy", 27, 19, 20},
			{"sunny", 30, 21, 0}, {"sunny", 31, 21, 0}, {"showers", 25, 18, 55},
		}},
		{"Tokyo", now{"cloudy", 18, 18, 66, 8, "S", "21:00"}, [7]day{
			{"cloudy", 19, 13, 30}, {"sunny", 22, 14, 10}, {"sunny", 23, 15, 5}, {"rain", 17, 13, 85},
			{"rain", 16, 12, 80}, {"partly cloudy", 20, 13, 20}, {"sunny", 22, 14, 5},
		}},
	}
}

// alert is one active weather alert.
type alert struct {
	region string
	text   string
}

// alerts returns the active alerts, sorted by region.
func alerts() []alert {
	return []alert{
		{"Alps", "Avalanche danger level 4 (high) above 2,000 m until Sunday; fresh snow 60 cm."},
		{"North Sea", "Gale warning: south-westerly winds 75 to 90 km/h, waves up to 7 m, through tomorrow evening."},
		{"Sahara", "Extreme heat: highs up to 47°C for the next 5 days."},
	}
}
