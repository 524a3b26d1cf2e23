package dev.decodiff.harness.testing;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Injects a checkpoint ({@link dev.decodiff.engine.Gemma4Model}, {@link EngineRun} or {@link java.nio.file.Path}) into a
 * test method parameter: {@code @Checkpoint("gemma4-tiny")} names a folder under checkpoints/ of the decodiff home.
 * A model is loaded once per test class and closed after it.
 */
@Target(ElementType.PARAMETER)
@Retention(RetentionPolicy.RUNTIME)
public @interface Checkpoint {
    String value() default "gemma4-tiny";
}
