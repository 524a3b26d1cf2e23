package dev.decodiff.engine;

import ai.djl.huggingface.tokenizers.HuggingFaceTokenizer;
import ai.djl.huggingface.tokenizers.jni.LibUtils;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.zip.GZIPInputStream;

/**
 * A checkpoint's {@code tokenizer.json}, run by the Hugging Face {@code tokenizers} library itself
 * (through DJL's JNI binding), so ids are exactly what {@code tokenizers.Tokenizer.from_file(...)} gives.
 *
 * <p>Offline by construction: the tokenizer is built from the local file's text (never from a hub
 * name), and before DJL is first touched this class sets {@code ai.djl.offline=true},
 * {@code OPT_OUT_TRACKING=true} and {@code RUST_FLAVOR=cpu} unless the user set them. Without these, DJL
 * 0.38 calls the EC2 metadata service (169.254.169.254, telemetry) on the first load in each JVM and, on a
 * machine with CUDA, wants a CUDA build of {@code libtokenizers} that is not in the jar: on an offline H200
 * box loading then fails ("Cannot download jni files: https://publish.djl.ai/tokenizers/0.21.0/jnilib/
 * 0.38.0/linux-x86_64/cu122-90/libtokenizers.so"). The CPU
 * build for linux-x86_64/aarch64, osx-aarch64 and win-x86_64 is inside the jar and is extracted to
 * {@code ~/.djl.ai/tokenizers/} (or {@code $DJL_CACHE_DIR}).
 *
 * <p>DJL's defaults are also overridden: it would truncate to 512 tokens and pad, and it would add
 * special tokens; here {@link #encode} adds none (the chat template writes {@code <bos>} itself) and
 * {@link #encodeWithSpecial} applies the file's post-processor, as {@code add_special_tokens=True} does.
 * Special and added tokens written inside the text ({@code "<start_of_turn>"}, {@code "<unused0>"}) are
 * recognised as single tokens, exactly as in Hugging Face.
 */
public final class TextTokenizer implements AutoCloseable {

    static {
        keepDjlOffline();
    }

    private static final String FILE = "tokenizer.json";
    private static final String GZ_FILE = "tokenizer.json.gz";
    private static final String CONFIG_FILE = "tokenizer_config.json";

    /** Turn-ending tokens of the Gemma families, stop tokens when the tokenizer has them. */
    private static final List<String> KNOWN_STOP_TOKENS = List.of("<end_of_turn>", "<turn|>");

    private final HuggingFaceTokenizer hf;
    private final Path source;
    private final String[] pieces;             // id -> token text as in the vocabulary / added tokens
    private final boolean[] byteFallback;       // id -> is a <0xNN> byte token (decoded by ByteFallback)
    private final Map<String, Integer> ids;    // model vocabulary: token text -> id
    private final Map<String, Integer> added;  // added_tokens content -> id
    private final Set<String> specials;         // added tokens with "special": true
    private final int bosId;
    private final int eosId;
    private final int[] stopIds;

    private TextTokenizer(HuggingFaceTokenizer hf, Path source, Vocabulary vocab, Config config) {
        this.hf = hf;
        this.source = source;
        this.pieces = vocab.pieces;
        this.ids = vocab.ids;
        this.added = Collections.unmodifiableMap(vocab.added);
        this.specials = Collections.unmodifiableSet(vocab.specials);
        this.byteFallback = new boolean[pieces.length];
        if (vocab.hasByteFallbackDecoder) {
            for (int i = 0; i < pieces.length; i++) byteFallback[i] = isByteToken(pieces[i]);
        }
        this.bosId = firstId("<bos>", config.bosToken);
        this.eosId = firstId("<eos>", config.eosToken);
        Set<Integer> stops = new LinkedHashSet<>();
        if (eosId >= 0) stops.add(eosId);
        if (config.eosToken != null) tokenId(config.eosToken).ifPresent(stops::add);
        for (String t : KNOWN_STOP_TOKENS) tokenId(t).ifPresent(stops::add);
        this.stopIds = stops.stream().mapToInt(Integer::intValue).toArray();
    }

    /**
     * Loads {@code tokenizer.json} (or {@code tokenizer.json.gz}) from a checkpoint folder; a path to the
     * file itself is accepted too. {@code tokenizer_config.json} beside it, when present, names the BOS and
     * EOS tokens where the usual {@code <bos>}/{@code <eos>} are absent.
     *
     * @throws CheckpointException naming the file when it is missing or not a tokenizer
     */
    public static TextTokenizer load(Path checkpointDir) {
        Path file = locate(checkpointDir);
        byte[] json;
        try (InputStream in = open(file)) {
            json = in.readAllBytes();
        } catch (NoSuchFileException e) {
            throw new CheckpointException("tokenizer file not found: " + file);
        } catch (IOException e) {
            throw new CheckpointException("cannot read tokenizer file " + file + ": " + e.getMessage(), e);
        }
        Config config = Config.read(file.resolveSibling(CONFIG_FILE));
        try {
            LibUtils.checkStatus();
        } catch (RuntimeException e) {
            throw new IllegalStateException("the Hugging Face tokenizers native library (DJL) could not be loaded: "
                    + e.getMessage(), e);
        }
        // The native tokenizer and our own id <-> piece tables are built from the same bytes, in parallel
        // (each takes about a second on Gemma's 262k-token vocabulary).
        CompletableFuture<HuggingFaceTokenizer> building = CompletableFuture.supplyAsync(() -> {
            try {
                return HuggingFaceTokenizer.newInstance(new ByteArrayInputStream(json), djlOptions());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        });
        Vocabulary vocab;
        try {
            vocab = Vocabulary.parse(json);
        } catch (IOException | RuntimeException e) {
            building.thenAccept(HuggingFaceTokenizer::close);
            throw new CheckpointException("broken tokenizer file " + file + " (not a Hugging Face tokenizer.json): "
                    + (e instanceof IOException io ? dev.decodiff.metal.JsonErrors.plain(io) : e.getMessage()), e);
        }
        HuggingFaceTokenizer hf;
        try {
            hf = building.join();
        } catch (CompletionException e) {
            Throwable cause = e.getCause() instanceof UncheckedIOException u ? u.getCause() : e.getCause();
            throw new CheckpointException("broken tokenizer file " + file + ": the tokenizers library rejects it: "
                    + cause.getMessage(), cause);
        }
        return new TextTokenizer(hf, file, vocab, config);
    }

    /** Ids of {@code text} with no special tokens added; special tokens written in the text are recognised. */
    public int[] encode(String text) {
        return toInts(hf.encode(text, false, false).getIds());
    }

    /** Ids of {@code text} with the tokenizer's post-processor applied ({@code add_special_tokens=True}). */
    public int[] encodeWithSpecial(String text) {
        return toInts(hf.encode(text, true, false).getIds());
    }

    /** Text of {@code ids}, special tokens included, as {@code tokenizer.decode(ids, skip_special_tokens=False)}. */
    public String decode(int[] ids) {
        if (ids.length == 0) return "";
        return hf.decode(toLongs(ids), false);
    }

    /**
     * Text of one token on its own. A byte-fallback token ({@code <0xE2>}) that is only part of a UTF-8
     * character decodes to U+FFFD here, as in Hugging Face; to stream text use {@link #streamingDecoder()}.
     */
    public String decodeToken(int id) {
        return decode(new int[] {id});
    }

    /** A decoder that takes ids one at a time and returns only text that later ids cannot change. */
    public StreamingDecoder streamingDecoder() {
        return new StreamingDecoder(this);
    }

    /** Id of a token given by its text (an added/special token such as {@code <end_of_turn>} or a vocabulary piece). */
    public OptionalInt tokenId(String token) {
        Integer id = added.get(token);
        if (id == null) id = ids.get(token);
        return id == null ? OptionalInt.empty() : OptionalInt.of(id);
    }

    /** True when {@code token} is one of the tokenizer's added tokens (special or not). */
    public boolean hasAddedToken(String token) {
        return added.containsKey(token);
    }

    /** Token text of an id as stored in the file ({@code "▁the"}, {@code "<0xE2>"}, {@code "<bos>"}). */
    public String piece(int id) {
        if (id < 0 || id >= pieces.length || pieces[id] == null) {
            throw new IllegalArgumentException("token id " + id + " is not in " + source);
        }
        return pieces[id];
    }

    /** True when the id is a byte-fallback token ({@code <0xNN>}) that the decoder turns into a raw byte. */
    public boolean isByteFallback(int id) {
        return id >= 0 && id < byteFallback.length && byteFallback[id];
    }

    /** True when the id is an added token marked special (e.g. {@code <bos>}, {@code <end_of_turn>}). */
    public boolean isSpecial(int id) {
        return id >= 0 && id < pieces.length && pieces[id] != null && specials.contains(pieces[id]);
    }

    /** One more than the largest id the tokenizer knows. */
    public int vocabSize() {
        return pieces.length;
    }

    /** The BOS id: {@code <bos>} (Gemma: 2), else the {@code bos_token} of tokenizer_config.json. */
    public int bosId() {
        if (bosId < 0) throw new IllegalStateException(source + " has no <bos> token and no bos_token in " + CONFIG_FILE);
        return bosId;
    }

    /** The EOS id: {@code <eos>} (Gemma: 1), else the {@code eos_token} of tokenizer_config.json. */
    public int eosId() {
        if (eosId < 0) throw new IllegalStateException(source + " has no <eos> token and no eos_token in " + CONFIG_FILE);
        return eosId;
    }

    /**
     * Ids that end generation: EOS, the config's {@code eos_token} (instruction-tuned Gemma 3 says
     * {@code <end_of_turn>}) and the turn-ending token of either Gemma chat format when present.
     */
    public int[] stopIds() {
        return stopIds.clone();
    }

    /** True when generation should stop at this id. */
    public boolean isStop(int id) {
        for (int s : stopIds) if (s == id) return true;
        return false;
    }

    /** The file this tokenizer was read from. */
    public Path source() {
        return source;
    }

    @Override
    public void close() {
        hf.close();
    }

    @Override
    public String toString() {
        return "TextTokenizer[" + source + ", " + pieces.length + " tokens]";
    }

    // ---------------------------------------------------------------------------------------------

    private int firstId(String usual, String fromConfig) {
        OptionalInt id = tokenId(usual);
        if (id.isEmpty() && fromConfig != null) id = tokenId(fromConfig);
        return id.orElse(-1);
    }

    private static Map<String, String> djlOptions() {
        Map<String, String> options = new HashMap<>();
        options.put("addSpecialTokens", "false"); // per call anyway; also the default of decode(long[])
        options.put("truncation", "false");       // DJL would otherwise truncate at 512 tokens
        options.put("padding", "false");
        return options;
    }

    private static Path locate(Path path) {
        if (Files.isDirectory(path)) {
            Path json = path.resolve(FILE);
            if (Files.exists(json)) return json;
            Path gz = path.resolve(GZ_FILE);
            if (Files.exists(gz)) return gz;
            throw new CheckpointException("tokenizer file not found: " + json + " (nor " + GZ_FILE + ")");
        }
        return path;
    }

    private static InputStream open(Path file) throws IOException {
        InputStream in = Files.newInputStream(file);
        return file.getFileName().toString().endsWith(".gz") ? new GZIPInputStream(in) : in;
    }

    static boolean isByteToken(String piece) {
        return piece != null && piece.length() == 6 && piece.startsWith("<0x") && piece.endsWith(">")
                && isHex(piece.charAt(3)) && isHex(piece.charAt(4));
    }

    private static boolean isHex(char c) {
        return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F') || (c >= 'a' && c <= 'f');
    }

    private static int[] toInts(long[] ids) {
        int[] out = new int[ids.length];
        for (int i = 0; i < ids.length; i++) out[i] = Math.toIntExact(ids[i]);
        return out;
    }

    private static long[] toLongs(int[] ids) {
        long[] out = new long[ids.length];
        for (int i = 0; i < ids.length; i++) out[i] = ids[i];
        return out;
    }

    /** Keeps DJL from reaching the network; the user's own settings (env or -D) win. */
    private static void keepDjlOffline() {
        setUnlessGiven("ai.djl.offline", "DJL_OFFLINE", "true");
        setUnlessGiven("OPT_OUT_TRACKING", "OPT_OUT_TRACKING", "true");
        setUnlessGiven("RUST_FLAVOR", "RUST_FLAVOR", "cpu");
    }

    private static void setUnlessGiven(String property, String env, String value) {
        if (System.getProperty(property) == null && System.getenv(env) == null) System.setProperty(property, value);
    }

    /** What the engine needs from tokenizer.json besides the tokenizer itself: id ↔ piece, added tokens. */
    private static final class Vocabulary {
        String[] pieces = new String[0];
        final Map<String, Integer> ids = new HashMap<>();
        final Map<String, Integer> added = new LinkedHashMap<>();
        final Set<String> specials = new LinkedHashSet<>();
        boolean hasByteFallbackDecoder;

        static Vocabulary parse(byte[] json) throws IOException {
            Vocabulary v = new Vocabulary();
            ObjectMapper mapper = new ObjectMapper();
            boolean sawModel = false;
            try (JsonParser p = mapper.getFactory().createParser(json)) {
                if (p.nextToken() != JsonToken.START_OBJECT) throw new IOException("top level is not a JSON object");
                while (p.nextToken() == JsonToken.FIELD_NAME) {
                    String field = p.currentName();
                    p.nextToken();
                    switch (field) {
                        case "added_tokens" -> {
                            JsonNode list = mapper.readTree(p);
                            for (JsonNode t : list) {
                                String content = t.path("content").asText(null);
                                if (content == null || !t.has("id")) throw new IOException("added token without content/id: " + t);
                                v.added.put(content, t.get("id").asInt());
                                if (t.path("special").asBoolean(false)) v.specials.add(content);
                            }
                        }
                        case "model" -> {
                            sawModel = true;
                            readModel(p, v.ids);
                        }
                        case "decoder" -> {
                            JsonNode decoder = mapper.readTree(p);
                            v.hasByteFallbackDecoder = mentionsByteFallback(decoder);
                        }
                        default -> p.skipChildren();
                    }
                }
            }
            if (!sawModel) throw new IOException("no \"model\" section");
            int size = 0;
            for (int id : v.ids.values()) size = Math.max(size, id + 1);
            for (int id : v.added.values()) size = Math.max(size, id + 1);
            v.pieces = new String[size];
            v.ids.forEach((piece, id) -> v.pieces[id] = piece);
            v.added.forEach((content, id) -> v.pieces[id] = content);
            return v;
        }

        /** Reads model.vocab: an object piece→id (BPE, WordPiece, WordLevel) or a list [piece, score] (Unigram). */
        private static void readModel(JsonParser p, Map<String, Integer> ids) throws IOException {
            if (p.currentToken() != JsonToken.START_OBJECT) throw new IOException("\"model\" is not an object");
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String field = p.currentName();
                JsonToken t = p.nextToken();
                if (field.equals("vocab") && t == JsonToken.START_OBJECT) {
                    while (p.nextToken() == JsonToken.FIELD_NAME) {
                        String piece = p.currentName();
                        p.nextToken();
                        ids.put(piece, p.getIntValue());
                    }
                } else if (field.equals("vocab") && t == JsonToken.START_ARRAY) {
                    int id = 0;
                    while (p.nextToken() == JsonToken.START_ARRAY) {
                        p.nextToken();
                        ids.put(p.getText(), id++);
                        while (p.nextToken() != JsonToken.END_ARRAY) p.skipChildren();
                    }
                } else {
                    p.skipChildren();
                }
            }
        }

        private static boolean mentionsByteFallback(JsonNode decoder) {
            if (decoder == null || decoder.isNull()) return false;
            if ("ByteFallback".equals(decoder.path("type").asText())) return true;
            for (JsonNode d : decoder.path("decoders")) if (mentionsByteFallback(d)) return true;
            return false;
        }
    }

    /** The two fields of tokenizer_config.json we use; both may be a string or {"content": ...}. */
    private record Config(String bosToken, String eosToken) {
        static Config read(Path file) {
            if (!Files.isRegularFile(file)) return new Config(null, null);
            try {
                JsonNode root = new ObjectMapper().readTree(file.toFile());
                return new Config(tokenText(root.get("bos_token")), tokenText(root.get("eos_token")));
            } catch (IOException e) {
                throw new CheckpointException("broken " + CONFIG_FILE + " " + file + ": " + dev.decodiff.metal.JsonErrors.plain(e), e);
            }
        }

        private static String tokenText(JsonNode n) {
            if (n == null || n.isNull()) return null;
            if (n.isTextual()) return n.asText();
            if (n.isObject() && n.has("content")) return n.get("content").asText();
            return null;
        }
    }
}
