package dev.sandbox4j.agent;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Describes one argument of a tool whose arguments are a record ({@link Tool#of}): the description
 * the model reads, and whether the model may leave it out.
 */
@Retention(RetentionPolicy.RUNTIME)
@Target({ElementType.RECORD_COMPONENT, ElementType.PARAMETER, ElementType.FIELD})
public @interface Param {

  /** What the argument means, for the model. */
  String value();

  /** Whether the model must give it; an omitted optional argument is {@code null} (or 0/false). */
  boolean required() default true;
}
