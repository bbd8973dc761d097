package mmlspark.contracts

/** The values of an enumerated string param: read case-insensitively, with the spellings other
  * libraries use for the same choice (SynapseML's, ONNX Runtime's) as aliases of ours. A param
  * keeps the value as it was given (so it saves and loads unchanged); the stage reads it through
  * [[apply]], which gives our spelling.
  *
  * @param values
  *   our spellings, in the order the docs list them
  * @param aliases
  *   other spellings -> ours
  */
final case class Choices(values: Seq[String], aliases: Map[String, String] = Map.empty) {

  private val lookup: Map[String, String] =
    values.map(v => v.toLowerCase -> v).toMap ++
      aliases.map { case (alias, ours) => alias.toLowerCase -> ours }

  require(aliases.values.forall(values.contains), s"aliases name values outside $values")

  /** Every accepted spelling, in lower case (a value is trimmed and lower-cased to match). */
  def spellings: Seq[String] = lookup.keys.toSeq.sorted

  /** Our spelling of each accepted spelling (lower case). */
  def resolutions: Map[String, String] = lookup

  /** Our spelling of `value`, if it is one of the choices in any spelling. */
  def resolve(value: String): Option[String] =
    Option(value).flatMap(v => lookup.get(v.trim.toLowerCase))

  /** Our spelling of `value`; an error naming the choices when it is none of them. */
  def apply(value: String): String = resolve(value).getOrElse {
    throw new IllegalArgumentException(s"'$value' is not one of ${describe}")
  }

  /** A param validator that accepts the choices in any spelling (the Python wrappers check the
    * same, see [[Check]]).
    */
  def isValid: Check = Check.Choice(this)

  /** The choices as the docs and errors list them, with the aliases accepted. */
  def describe: String = {
    val ours = values.map(v => s"'$v'").mkString(", ")
    if (aliases.isEmpty) ours
    else s"$ours (any case; also ${aliases.keys.toSeq.sorted.map(a => s"'$a'").mkString(", ")})"
  }
}

object Choices {

  /** The channel order of an image tensor. */
  val channelOrder: Choices = Choices(Seq("RGB", "BGR"))
}
