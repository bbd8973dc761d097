package mmlspark.contracts

/** A param validator as data. The param tables (project/SharedParamsSpec.scala,
  * project/StageParamsSpec.scala) give most params one of these; it checks values on the JVM like
  * any validator, and the code generator reads it back off the compiled stage and writes the same
  * check into the Python wrapper ([[python]], a call of `mmlspark.core.checks`), which applies it
  * wherever no JVM stage checks at set time (the Python backend, Spark Connect). One rule, one
  * place: a param whose rule is not one of these keeps a plain function, and is checked only by the
  * JVM.
  */
sealed trait Check extends (Any => Boolean) with Serializable {

  /** This check as a Python expression over the functions of `mmlspark.core.validators`. */
  def python: String

  /** The functions of `mmlspark.core.validators` that [[python]] calls. */
  def functions: Seq[String] = Seq(python.takeWhile(c => c.isLetter || c == '_'))
}

object Check {

  private def number(value: Any): Double = value match {
    case n: java.lang.Number => n.doubleValue
    case _ => Double.NaN
  }

  private def pyString(s: String): String =
    "\"" + s.flatMap {
      case '\\' => "\\\\"
      case '"' => "\\\""
      case c => c.toString
    } + "\""

  private def pyValue(value: Any): String = value match {
    case s: String => pyString(s)
    case n: java.lang.Number => n.toString
    case other => throw new IllegalArgumentException(s"no Python literal for $other")
  }

  private def names(value: Any): Seq[String] = value match {
    case a: Array[_] => a.toSeq.map(x => if (x == null) null else x.toString)
    case s: Seq[_] => s.map(x => if (x == null) null else x.toString)
    case _ => Seq.empty
  }

  private def doubles(value: Any): Seq[Double] = value match {
    case a: Array[Double] => a.toSeq
    case a: Array[_] => a.toSeq.map(number)
    case _ => Seq.empty
  }

  /** At least `bound` (Spark's `ParamValidators.gtEq`). */
  final case class AtLeast(bound: Long) extends Check {
    def apply(value: Any): Boolean = number(value) >= bound
    def python: String = s"at_least($bound)"
  }

  /** Over `bound` (Spark's `ParamValidators.gt`). */
  final case class Above(bound: Double) extends Check {
    def apply(value: Any): Boolean = number(value) > bound
    def python: String = s"above($bound)"
  }

  /** Between `lower` and `upper`, both included (Spark's `ParamValidators.inRange`). */
  final case class Between(lower: Double, upper: Double) extends Check {
    def apply(value: Any): Boolean = {
      val v = number(value)
      v >= lower && v <= upper
    }
    def python: String = s"between($lower, $upper)"
  }

  /** One of `values`, exactly (Spark's `ParamValidators.inArray`). */
  final case class OneOf(values: Seq[Any]) extends Check {
    def apply(value: Any): Boolean = values.contains(value)
    def python: String = values.map(pyValue).mkString("one_of(", ", ", ")")
  }

  /** One of an enumerated string param's [[Choices]], in any spelling it accepts. */
  final case class Choice(choices: Choices) extends Check {
    def apply(value: Any): Boolean = value match {
      case s: String => choices.resolve(s).isDefined
      case _ => false
    }
    def python: String = {
      val values = choices.values.map(pyString).mkString("[", ", ", "]")
      val aliases = choices.aliases.toSeq.sorted
        .map { case (alias, ours) => s"${pyString(alias)}: ${pyString(ours)}" }
        .mkString("{", ", ", "}")
      s"choice($values, $aliases)"
    }
  }

  /** A name: not null, not empty. */
  case object NonEmptyName extends Check {
    def apply(value: Any): Boolean = value match {
      case s: String => s.nonEmpty
      case _ => false
    }
    def python: String = "non_empty_name"
  }

  /** Names, each not null and not empty (the list itself may be empty). */
  case object NonEmptyNames extends Check {
    def apply(value: Any): Boolean = names(value).forall(n => n != null && n.nonEmpty)
    def python: String = "non_empty_names"
  }

  /** Names without repeats (the list may be empty). */
  case object DistinctNames extends Check {
    def apply(value: Any): Boolean = {
      val all = names(value)
      all.distinct.length == all.length
    }
    def python: String = "distinct_names(empty_allowed=True)"
  }

  /** An array with at least one entry. */
  case object NotEmpty extends Check {
    def apply(value: Any): Boolean = value match {
      case a: Array[_] => a.nonEmpty
      case s: Seq[_] => s.nonEmpty
      case _ => false
    }
    def python: String = "not_empty"
  }

  /** Every one of `checks`. */
  final case class All(checks: Check*) extends Check {
    def apply(value: Any): Boolean = checks.forall(_(value))
    def python: String = checks.map(_.python).mkString("all_of(", ", ", ")")
    override def functions: Seq[String] = ("all_of" +: checks.flatMap(_.functions)).distinct
  }

  /** An array of one of the `lengths`, and, when `positive`, of values over 0 only. */
  final case class Lengths(lengths: Seq[Int], positive: Boolean = false) extends Check {
    def apply(value: Any): Boolean = {
      val all = doubles(value)
      lengths.contains(all.length) && (!positive || all.forall(_ > 0))
    }
    def python: String =
      s"lengths(${lengths.mkString("[", ", ", "]")}, positive=${if (positive) "True" else "False"})"
  }
}
