package dev.decodiff.engine;

import java.util.Arrays;

/**
 * Turns generated ids into text as they arrive, emitting only text that later ids cannot change, so the
 * concatenation of everything emitted (plus {@link #flush()}) equals {@code tokenizer.decode(allIds)}.
 *
 * <p>Why a single token's text is not enough: Gemma's tokenizer spells characters outside its vocabulary
 * as byte tokens ({@code "€"} = {@code <0xE2><0x82><0xAC>}), and its {@code ByteFallback} decoder turns a
 * whole run of consecutive byte tokens into text at once: the run's bytes if they are valid UTF-8, else
 * one U+FFFD per byte. A run is therefore final only once a non-byte token follows it. This decoder
 * holds text back while the newest id is a byte token, and also while the new text ends in U+FFFD (the
 * usual guard for byte-level tokenizers whose pieces split characters).
 *
 * <p>Each step decodes a window that starts at the previous emitted chunk (the scheme of Hugging Face
 * text-generation-inference) so that decoders which treat the first token specially (a {@code Strip} of
 * the leading space) do not change text in mid-stream.
 */
public final class StreamingDecoder {

    private final TextTokenizer tokenizer;
    private int[] ids = new int[16];
    private int size;
    private int prefixOffset; // start of the window: the chunk emitted last
    private int readOffset;   // everything before this has been emitted

    StreamingDecoder(TextTokenizer tokenizer) {
        this.tokenizer = tokenizer;
    }

    /**
     * Adds one id; returns the text it completes, possibly empty (held back) or covering earlier ids too.
     */
    public String push(int id) {
        if (size == ids.length) ids = Arrays.copyOf(ids, size * 2);
        ids[size++] = id;
        if (tokenizer.isByteFallback(id)) return "";
        String prefix = decode(prefixOffset, readOffset);
        String text = decode(prefixOffset, size);
        if (text.length() > prefix.length() && text.startsWith(prefix) && !text.endsWith("\uFFFD")) {
            prefixOffset = readOffset;
            readOffset = size;
            return text.substring(prefix.length());
        }
        return "";
    }

    /** Emits whatever is held back (at the end of generation), U+FFFD included where bytes stayed incomplete. */
    public String flush() {
        if (readOffset == size) return "";
        String prefix = decode(prefixOffset, readOffset);
        String text = decode(prefixOffset, size);
        prefixOffset = readOffset;
        readOffset = size;
        return text.startsWith(prefix) ? text.substring(prefix.length()) : text;
    }

    /** True when some pushed ids have not yet produced text. */
    public boolean hasPending() {
        return readOffset < size;
    }

    /** All ids pushed so far. */
    public int[] ids() {
        return Arrays.copyOf(ids, size);
    }

    private String decode(int from, int to) {
        return from == to ? "" : tokenizer.decode(Arrays.copyOfRange(ids, from, to));
    }
}
