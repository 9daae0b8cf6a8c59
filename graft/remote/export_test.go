package remote

// EachStore is eachStore for the package's external tests.
var EachStore = eachStore
