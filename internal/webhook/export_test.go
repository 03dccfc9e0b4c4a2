package webhook

// ReadTimeout is readTimeout, for the tests outside the package.
const ReadTimeout = readTimeout
