package dev.decodiff.harness.testing;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Injects a reference dump ({@link ReferenceDump}, {@link dev.decodiff.harness.dump.DumpReader} or {@link java.nio.file.Path})
 * into a test method parameter: {@code @Reference("gemma4-tiny/long")} names a folder under reference-dumps/ of the
 * decodiff home, an absolute path or one starting with "./" is taken as it is.
 */
@Target(ElementType.PARAMETER)
@Retention(RetentionPolicy.RUNTIME)
public @interface Reference {
    String value() default "gemma4-tiny/long";
}
