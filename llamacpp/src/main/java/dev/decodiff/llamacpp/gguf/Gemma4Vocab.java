package dev.decodiff.llamacpp.gguf;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The tokenizer metadata llama.cpp's Gemma 4 conversion writes from tokenizer.json and tokenizer_config.json
 * (tokenizer model "gemma4": byte-fallback BPE with merges). Tokens are listed by id with score -1000 and a
 * type: BYTE for {@code <0xNN>}, CONTROL for the special tokens named in tokenizer_config.json, USER_DEFINED for
 * Gemma 4's visible tool/channel markers and for added tokens that are not special, NORMAL otherwise.
 */
public final class Gemma4Vocab {
    /** gguf-py's TokenType values. */
    static final int NORMAL = 1, CONTROL = 3, USER_DEFINED = 4, BYTE = 6;
    private static final Set<String> VISIBLE = Set.of("<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>",
            "<|tool_response>", "<tool_response|>", "<|\"|>");
    private static final Pattern BYTE_TOKEN = Pattern.compile("<0x[0-9A-Fa-f]{2}>");
    private static final List<String> SPECIAL_TYPES = List.of("bos", "eos", "unk", "sep", "pad", "cls", "mask");
    private static final Map<String, String> ID_KEYS = Map.of("bos", "tokenizer.ggml.bos_token_id", "eos", "tokenizer.ggml.eos_token_id",
            "unk", "tokenizer.ggml.unknown_token_id", "sep", "tokenizer.ggml.seperator_token_id", "pad", "tokenizer.ggml.padding_token_id",
            "cls", "tokenizer.ggml.cls_token_id", "mask", "tokenizer.ggml.mask_token_id");
    private static final Map<String, String> ADD_KEYS = Map.of("bos", "tokenizer.ggml.add_bos_token", "eos", "tokenizer.ggml.add_eos_token",
            "sep", "tokenizer.ggml.add_sep_token");

    private final LinkedHashMap<String, GgufValue> metadata;
    private final int embeddingRows;

    private Gemma4Vocab(LinkedHashMap<String, GgufValue> metadata, int embeddingRows) {
        this.metadata = metadata;
        this.embeddingRows = embeddingRows;
    }

    /** The tokenizer metadata, in the order the converter writes it. */
    public Map<String, GgufValue> metadata() { return metadata; }

    /**
     * Rows of token_embd the converter keeps: it cuts the embedding to len(vocab) + len(added_tokens) of
     * tokenizer.json when that is smaller than vocab_size.
     */
    public int embeddingRows() { return embeddingRows; }

    /** Reads the tokenizer of a checkpoint folder, or returns null when it has no tokenizer.json. */
    public static Gemma4Vocab read(Path dir) {
        Path file = dir.resolve("tokenizer.json");
        if (!Files.isRegularFile(file)) return null;
        var json = new ObjectMapper();
        JsonNode tok;
        JsonNode cfg = null;
        try {
            tok = json.readTree(file.toFile());
            Path cfgFile = dir.resolve("tokenizer_config.json");
            if (Files.isRegularFile(cfgFile)) cfg = json.readTree(cfgFile.toFile());
        } catch (IOException e) {
            throw new GgufException(file, "cannot read the tokenizer: " + e.getMessage().lines().findFirst().orElse(""), e);
        }
        return build(file, tok, cfg, readConfig(dir));
    }

    private static JsonNode readConfig(Path dir) {
        try {
            Path f = dir.resolve("config.json");
            return Files.isRegularFile(f) ? new ObjectMapper().readTree(f.toFile()) : null;
        } catch (IOException e) {
            return null; // config.json is read (and its errors reported) by the converter itself
        }
    }

    static Gemma4Vocab build(Path file, JsonNode tok, JsonNode cfg, JsonNode config) {
        JsonNode model = tok.path("model");
        if (!model.path("type").asText().equals("BPE") || !model.path("byte_fallback").asBoolean(false)
                || !tok.path("decoder").path("type").asText().equals("Sequence"))
            throw new GgufException(file, "is not a byte-fallback BPE tokenizer like Gemma 4's, which llama.cpp's gemma4 tokenizer needs;"
                    + " move it out of the folder to convert without a vocabulary (token ids only)");
        JsonNode vocab = model.path("vocab");
        if (!vocab.isObject() || vocab.isEmpty()) throw new GgufException(file, "has no model.vocab");

        var byId = new HashMap<Integer, String>();
        var idOf = new HashMap<String, Integer>();
        vocab.fields().forEachRemaining(e -> put(file, byId, idOf, e.getValue().asInt(), e.getKey()));
        int baseSize = vocab.size();
        JsonNode added = tok.path("added_tokens");
        var addedNonSpecial = new HashSet<String>();
        var addedBeyondBase = new ArrayList<int[]>();
        for (JsonNode a : added) {
            int id = a.path("id").asInt(-1);
            String content = a.path("content").asText(null);
            if (id < 0 || content == null) throw new GgufException(file, "has an added token without id or content");
            if (!a.path("special").asBoolean(false)) addedNonSpecial.add(content);
            if (!byId.containsKey(id) || !byId.get(id).equals(content)) {
                put(file, byId, idOf, id, content);
                if (id >= baseSize) addedBeyondBase.add(new int[]{id});
            }
        }

        var specialIds = specialIds(cfg, idOf);
        int n = baseSize + addedBeyondBase.size();
        var tokens = new ArrayList<String>(n);
        var scores = new ArrayList<Float>(n);
        var types = new ArrayList<Integer>(n);
        for (int id = 0; id < n; id++) {
            String text = byId.get(id);
            if (text == null) throw new GgufException(file, "has no token with id " + id + " (ids must run from 0 to " + (n - 1) + " without gaps)");
            int type;
            if (VISIBLE.contains(text)) type = USER_DEFINED;
            else if (id >= baseSize) type = specialIds.contains(id) ? CONTROL : USER_DEFINED;
            else if (BYTE_TOKEN.matcher(text).matches()) type = BYTE;
            else type = specialIds.contains(id) ? CONTROL : NORMAL;
            tokens.add(text);
            scores.add(-1000.0f);
            types.add(type);
        }

        var md = new LinkedHashMap<String, GgufValue>();
        md.put("tokenizer.ggml.model", GgufValue.string("gemma4"));
        md.put("tokenizer.ggml.tokens", GgufValue.stringArray(tokens));
        md.put("tokenizer.ggml.scores", GgufValue.f32Array(scores));
        md.put("tokenizer.ggml.token_type", GgufValue.i32Array(types));
        var merges = merges(file, model.path("merges"));
        if (!merges.isEmpty()) md.put("tokenizer.ggml.merges", GgufValue.stringArray(merges));
        specialTokenIds(tok, cfg, config).forEach((typ, id) -> md.put(ID_KEYS.get(typ), GgufValue.u32(id)));
        addFlags(tok, cfg).forEach((typ, v) -> { if (ADD_KEYS.containsKey(typ)) md.put(ADD_KEYS.get(typ), GgufValue.bool(v)); });
        chatTemplate(file.getParent(), cfg, md);
        normalizer(tok.path("normalizer"), md);
        md.put("tokenizer.ggml.add_space_prefix", GgufValue.bool(false));
        md.put("tokenizer.ggml.add_bos_token", GgufValue.bool(true));
        return new Gemma4Vocab(md, baseSize + added.size());
    }

    private static void put(Path file, Map<Integer, String> byId, Map<String, Integer> idOf, int id, String text) {
        if (id < 0) throw new GgufException(file, "token '" + text + "' has negative id " + id);
        var prev = byId.put(id, text);
        if (prev != null && !prev.equals(text)) throw new GgufException(file, "id " + id + " names two tokens, '" + prev + "' and '" + text + "'");
        idOf.putIfAbsent(text, id);
    }

    /** What transformers calls all_special_ids: the tokens tokenizer_config.json names as special. */
    private static Set<Integer> specialIds(JsonNode cfg, Map<String, Integer> idOf) {
        var out = new HashSet<Integer>();
        if (cfg == null) return out;
        var names = new ArrayList<String>();
        for (String typ : SPECIAL_TYPES) content(cfg.get(typ + "_token"), names);
        for (String listKey : List.of("additional_special_tokens", "extra_special_tokens")) {
            JsonNode l = cfg.get(listKey);
            if (l != null && l.isArray()) l.forEach(x -> content(x, names));
            else if (l != null && l.isObject()) l.elements().forEachRemaining(x -> content(x, names));
        }
        for (String s : names) if (idOf.containsKey(s)) out.add(idOf.get(s));
        return out;
    }

    private static void content(JsonNode entry, List<String> out) {
        if (entry == null) return;
        if (entry.isTextual()) out.add(entry.asText());
        else if (entry.isObject() && entry.path("content").isTextual()) out.add(entry.get("content").asText());
    }

    /** Merges as "a b" strings; a space inside a part is written as U+0120, as the converter does. */
    private static List<String> merges(Path file, JsonNode merges) {
        var out = new ArrayList<String>();
        if (!merges.isArray() || merges.isEmpty()) return out;
        for (JsonNode m : merges) {
            if (m.isTextual()) out.add(m.asText());
            else if (m.isArray() && m.size() == 2) out.add(m.get(0).asText().replace(' ', '\u0120') + " " + m.get(1).asText().replace(' ', '\u0120'));
            else throw new GgufException(file, "has a merge that is neither \"a b\" nor [a, b]: " + m);
        }
        return out;
    }

    /** bos/eos/… ids: tokenizer_config.json's *_token looked up among added_tokens, else config.json's *_token_id. */
    private static Map<String, Integer> specialTokenIds(JsonNode tok, JsonNode cfg, JsonNode config) {
        var out = new LinkedHashMap<String, Integer>();
        if (cfg != null) {
            for (String typ : SPECIAL_TYPES) {
                var names = new ArrayList<String>();
                content(cfg.get(typ + "_token"), names);
                if (names.isEmpty()) continue;
                for (JsonNode a : tok.path("added_tokens"))
                    if (a.path("content").asText("").equals(names.getFirst())) { out.put(typ, a.path("id").asInt()); break; }
            }
        }
        if (config != null) {
            for (String typ : SPECIAL_TYPES) {
                JsonNode id = config.get(typ + "_token_id");
                if (id == null && config.has("text_config")) id = config.get("text_config").get(typ + "_token_id");
                if (id != null && id.isInt() && id.asInt() >= 0) out.putIfAbsent(typ, id.asInt());
            }
        }
        return out;
    }

    /**
     * add_bos/add_eos/add_sep: what tokenizer.json's post-processor adds (its leading and trailing special tokens),
     * then tokenizer_config.json's add_*_token booleans, which win.
     */
    private static Map<String, Boolean> addFlags(JsonNode tok, JsonNode cfg) {
        var out = new LinkedHashMap<String, Boolean>();
        JsonNode pp = tok.path("post_processor");
        var processors = new ArrayList<JsonNode>();
        if (pp.has("processors")) pp.get("processors").forEach(processors::add);
        else if (pp.isObject()) processors.add(pp);
        for (JsonNode p : processors) {
            String type = p.path("type").asText();
            if (type.equals("RobertaProcessing")) {
                out.put("bos", true);
                out.put("eos", true);
                out.put("sep", true);
            } else if (type.equals("TemplateProcessing") && p.path("single").size() > 1) {
                JsonNode single = p.get("single");
                String first = single.get(0).path("SpecialToken").path("id").asText(null);
                String last = single.get(single.size() - 1).path("SpecialToken").path("id").asText(null);
                var bos = new ArrayList<String>();
                var eos = new ArrayList<String>();
                if (cfg != null) {
                    content(cfg.get("bos_token"), bos);
                    content(cfg.get("eos_token"), eos);
                }
                if (first != null) out.put("bos", bos.contains(first) || cfg == null);
                if (last != null) out.put("eos", eos.contains(last) || cfg == null);
            }
        }
        if (cfg != null) {
            for (String typ : SPECIAL_TYPES) {
                JsonNode v = cfg.get("add_" + typ + "_token");
                if (v != null && v.isBoolean()) out.put(typ, v.asBoolean());
            }
        }
        return out;
    }

    /** tokenizer_config.json's chat_template (a string, or named templates), else chat_template.jinja / .json. */
    private static void chatTemplate(Path dir, JsonNode cfg, Map<String, GgufValue> md) {
        JsonNode t = cfg == null ? null : cfg.get("chat_template");
        try {
            if (t == null && dir != null && Files.isRegularFile(dir.resolve("chat_template.jinja"))) {
                md.put("tokenizer.chat_template", GgufValue.string(Files.readString(dir.resolve("chat_template.jinja"))));
                return;
            }
            if (t == null && dir != null && Files.isRegularFile(dir.resolve("chat_template.json")))
                t = new ObjectMapper().readTree(dir.resolve("chat_template.json").toFile()).get("chat_template");
        } catch (IOException e) {
            throw new GgufException(dir, "cannot read its chat template: " + e.getMessage(), e);
        }
        if (t == null || t.isNull()) return;
        if (t.isTextual()) {
            md.put("tokenizer.chat_template", GgufValue.string(t.asText()));
            return;
        }
        if (!t.isArray()) return;
        String dflt = null;
        var names = new ArrayList<String>();
        for (JsonNode choice : t) {
            String name = choice.path("name").asText("").replaceAll("[^A-Za-z0-9]", "_");
            JsonNode tpl = choice.get("template");
            if (name.isEmpty() || tpl == null || !tpl.isTextual()) continue;
            if (name.equals("default")) dflt = tpl.asText();
            else {
                names.add(name);
                md.put("tokenizer.chat_template." + name, GgufValue.string(tpl.asText()));
            }
        }
        if (!names.isEmpty()) md.put("tokenizer.chat_templates", GgufValue.stringArray(names));
        if (dflt != null) md.put("tokenizer.chat_template", GgufValue.string(dflt));
    }

    private static void normalizer(JsonNode n, Map<String, GgufValue> md) {
        if (n == null || !n.isObject()) return;
        switch (n.path("type").asText()) {
            case "Lowercase" -> md.put("tokenizer.ggml.normalizer.lowercase", GgufValue.bool(true));
            case "StripAccents" -> md.put("tokenizer.ggml.normalizer.strip_accents", GgufValue.bool(true));
            case "BertNormalizer" -> {
                if (n.has("lowercase")) md.put("tokenizer.ggml.normalizer.lowercase", GgufValue.bool(n.get("lowercase").asBoolean()));
                if (n.has("strip_accents") && n.get("strip_accents").isBoolean())
                    md.put("tokenizer.ggml.normalizer.strip_accents", GgufValue.bool(n.get("strip_accents").asBoolean()));
            }
            case "Sequence" -> n.path("normalizers").forEach(x -> normalizer(x, md));
            default -> { }
        }
    }
}
