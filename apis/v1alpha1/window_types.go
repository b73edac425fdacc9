package v1alpha1

// A Weekday names a day of the week, in full or by its first three letters.
// +kubebuilder:validation:Enum=Monday;Tuesday;Wednesday;Thursday;Friday;Saturday;Sunday;Mon;Tue;Wed;Thu;Fri;Sat;Sun
type Weekday string

// A TimeWindow is a time of day, on some days of the week. A window whose end
// is before its start runs past midnight into the next day; one whose end
// equals its start lasts the whole day.
// +kubebuilder:validation:XValidation:rule="self.start.matches('^([01][0-9]|2[0-3]):[0-5][0-9]$') && self.end.matches('^([01][0-9]|2[0-3]):[0-5][0-9]$')",message="start and end are times of day as HH:MM, such as 09:00 or 17:30"
// +kubebuilder:validation:XValidation:rule="has(self.timeZone) && self.timeZone.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$')",message="timeZone is an IANA time zone such as UTC or Europe/Berlin"
type TimeWindow struct {
	// Days the window starts on; every day when empty.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=7
	Days []Weekday `json:"days,omitempty"`

	// Start is the time of day the window opens, as HH:MM.
	// +kubebuilder:validation:MaxLength=5
	Start string `json:"start"`

	// End is the time of day the window closes, as HH:MM.
	// +kubebuilder:validation:MaxLength=5
	End string `json:"end"`

	// TimeZone of start and end, an IANA name such as Europe/Berlin.
	// +optional
	// +kubebuilder:default="UTC"
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}
