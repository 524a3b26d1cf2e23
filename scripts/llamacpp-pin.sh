# The llama.cpp decodiff's bindings are written for: node-llama-cpp's packages on the npm registry, pinned by version
# and sha256. Sourced by scripts/llamacpp.sh (the prebuilt libraries) and scripts/llamacpp-native.sh (a native build
# of the same source); LlamaCppHome (Java) names the same version.
LLAMACPP_PACKAGE_VERSION=3.22.1
LLAMACPP_RELEASE=v0.5.0
LLAMACPP_BIN_PKG="@node-llama-cpp/linux-x64@$LLAMACPP_PACKAGE_VERSION"
LLAMACPP_BIN_TGZ="node-llama-cpp-linux-x64-$LLAMACPP_PACKAGE_VERSION.tgz"
LLAMACPP_BIN_SHA256=0d953e1503d5ab4608d8ed5b739132308c81ac05ffeb760d2a7f30e08a9f90e0
LLAMACPP_SRC_PKG="node-llama-cpp@$LLAMACPP_PACKAGE_VERSION"
LLAMACPP_SRC_TGZ="node-llama-cpp-$LLAMACPP_PACKAGE_VERSION.tgz"
LLAMACPP_SRC_SHA256=a0d9dd80eacd2ab1cfe71aee57ac8a806487fd70b3d2a38fbec637752d9e5c5f
