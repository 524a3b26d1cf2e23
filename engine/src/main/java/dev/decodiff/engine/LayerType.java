package dev.decodiff.engine;

/** The attention kind of a decoder layer, as named in config.json's layer_types. */
public enum LayerType {
    SLIDING("sliding_attention"), FULL("full_attention");

    private final String configName;

    LayerType(String configName) { this.configName = configName; }

    public String configName() { return configName; }

    public static LayerType fromConfig(String name, String file) {
        for (var t : values()) if (t.configName.equals(name)) return t;
        throw new CheckpointException(file + ": unknown layer type '" + name + "' (expected sliding_attention or full_attention)");
    }
}
