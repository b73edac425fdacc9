//go:build generate

// Code generation for the API types: `make generate` runs `go generate ./apis/...`.

// Remove existing CRDs so that deleted types do not leave stale manifests behind.
//go:generate rm -rf ../package/crds

// Deepcopy methods and CRD manifests.
//go:generate go tool controller-gen object:headerFile=../hack/boilerplate.go.txt paths=./... crd:crdVersions=v1 output:artifacts:config=../package/crds

// crossplane-runtime method sets (resource.Managed, ProviderConfig, usages). angryjet
// lives in its own tools module; see hack/tools/go.mod.
//go:generate go tool -modfile=../hack/tools/go.mod angryjet generate-methodsets --header-file=../hack/boilerplate.go.txt ./...

package apis
