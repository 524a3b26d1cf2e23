/** llama.cpp as a candidate engine: FFM bindings to its C API and a Hugging Face to GGUF converter. */
package dev.decodiff.llamacpp;
