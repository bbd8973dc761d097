package mmlspark.opencv

import scala.reflect.ClassTag

import mmlspark.contracts.Choices
import org.json4s._

/** The type of one argument of an image operation, read off the case class's constructor: how it is
  * written to and read from the JSON form, and how the generated Python takes it.
  */
sealed abstract class FieldType(val pythonType: String) extends Serializable {
  def toJson(value: Any): JValue
  def fromJson(json: JValue): Any

  /** A Python expression that converts the argument `name` to the JSON-ready value. */
  def pythonConvert(name: String): String

  /** A value as a Python literal. */
  def pythonLiteral(value: Any): String

  protected implicit val formats: Formats = DefaultFormats
}

object FieldType {
  case object IntField extends FieldType("int") {
    def toJson(value: Any): JValue = JInt(value.asInstanceOf[Int])
    def fromJson(json: JValue): Any = json.extract[Int]
    def pythonConvert(name: String): String = s"int($name)"
    def pythonLiteral(value: Any): String = value.toString
  }

  case object DoubleField extends FieldType("float") {
    def toJson(value: Any): JValue = JDouble(value.asInstanceOf[Double])
    def fromJson(json: JValue): Any = json.extract[Double]
    def pythonConvert(name: String): String = s"float($name)"
    def pythonLiteral(value: Any): String = value.asInstanceOf[Double].toString
  }

  case object StringField extends FieldType("str") {
    def toJson(value: Any): JValue = JString(value.asInstanceOf[String])
    def fromJson(json: JValue): Any = json.extract[String]
    def pythonConvert(name: String): String = s"str($name)"
    def pythonLiteral(value: Any): String = "\"" + value + "\""
  }

  case object DoublesField extends FieldType("Sequence[float]") {
    def toJson(value: Any): JValue =
      JArray(value.asInstanceOf[Seq[Double]].map(JDouble(_)).toList)
    def fromJson(json: JValue): Any = json.extract[List[Double]]
    def pythonConvert(name: String): String = s"[float(v) for v in $name]"
    def pythonLiteral(value: Any): String =
      value.asInstanceOf[Seq[Double]].mkString("[", ", ", "]")
  }

  /** The field type of a constructor parameter (a `Seq` holds doubles: the only sequence used). */
  def of(cls: Class[_]): FieldType = cls match {
    case c if c == java.lang.Integer.TYPE => IntField
    case c if c == java.lang.Double.TYPE => DoubleField
    case c if c == classOf[String] => StringField
    case c if classOf[Seq[_]].isAssignableFrom(c) => DoublesField
    case other => throw new IllegalArgumentException(s"no image-op field type for $other")
  }
}

/** Named OpenCV constants an integer field takes (the Python side gets them as named constants);
  * `kind` names them in errors ("an OpenCV INTER_* code").
  */
final case class Constants(kind: String, values: (String, Int)*) {
  def nameOf(value: Int): Option[String] = values.find(_._2 == value).map(_._1)
  def contains(value: Int): Boolean = values.exists(_._2 == value)

  /** The error for a `field` set to `value`, which is not one of the constants. */
  def mismatch(field: String, value: Int): String =
    s"$field must be ${if (kind.isEmpty) range else s"$kind $range"} but was $value"

  /** The rule that `field` holds one of these constants. */
  def rule(field: String): OpRule = OpRule(
    RuleKind.OneOf,
    Seq(field),
    s"$field must be ${if (kind.isEmpty) range else s"$kind $range"} but was {$field}",
    values.map(_._2.toString)
  )

  /** The codes as `min-max` (they are consecutive). */
  def range: String = s"${values.map(_._2).min}-${values.map(_._2).max}"
  def describe: String = values.map { case (n, v) => s"$v $n" }.mkString(", ")
}

object Constants {
  import org.opencv.imgproc.Imgproc

  val interpolation: Constants = Constants(
    "an OpenCV INTER_* code",
    "INTER_NEAREST" -> Imgproc.INTER_NEAREST,
    "INTER_LINEAR" -> Imgproc.INTER_LINEAR,
    "INTER_CUBIC" -> Imgproc.INTER_CUBIC,
    "INTER_AREA" -> Imgproc.INTER_AREA,
    "INTER_LANCZOS4" -> Imgproc.INTER_LANCZOS4
  )

  val threshold: Constants = Constants(
    "",
    "THRESH_BINARY" -> Imgproc.THRESH_BINARY,
    "THRESH_BINARY_INV" -> Imgproc.THRESH_BINARY_INV,
    "THRESH_TRUNC" -> Imgproc.THRESH_TRUNC,
    "THRESH_TOZERO" -> Imgproc.THRESH_TOZERO,
    "THRESH_TOZERO_INV" -> Imgproc.THRESH_TOZERO_INV
  )
}

/** What an [[OpRule]] checks of the values of its fields: one of a few kinds, each written once
  * here and once in the Python engine (`mmlspark/_engine/ops.py`), which reads every operation's
  * rules off the registry codegen writes. `choices` holds the accepted values where the kind takes
  * some, as strings (a number as Java prints it; a spelling in lower case).
  */
sealed abstract class RuleKind(val name: String) extends Serializable {
  def holds(values: Seq[Any], choices: Seq[String]): Boolean

  protected def number(value: Any): Double = value.asInstanceOf[Number].doubleValue
}

object RuleKind {

  /** Every field is over 0. */
  case object Positive extends RuleKind("positive") {
    def holds(values: Seq[Any], choices: Seq[String]): Boolean = values.forall(number(_) > 0)
  }

  /** Every field is at least 0. */
  case object AtLeastZero extends RuleKind("atLeastZero") {
    def holds(values: Seq[Any], choices: Seq[String]): Boolean = values.forall(number(_) >= 0)
  }

  /** Every (integer) field is odd and over 0. */
  case object OddPositive extends RuleKind("oddPositive") {
    def holds(values: Seq[Any], choices: Seq[String]): Boolean =
      values.forall(v => number(v) > 0 && number(v) % 2 == 1)
  }

  /** Every field, as Java prints it, is one of the choices. */
  case object OneOf extends RuleKind("oneOf") {
    def holds(values: Seq[Any], choices: Seq[String]): Boolean =
      values.forall(v => choices.contains(v.toString))
  }

  /** Every (string) field, trimmed and in lower case, is one of the choices. */
  case object Spelling extends RuleKind("spelling") {
    def holds(values: Seq[Any], choices: Seq[String]): Boolean =
      values.forall(v => choices.contains(v.toString.trim.toLowerCase))
  }

  /** The two (list) fields have the same length, over 0. */
  case object SameNonEmptyLength extends RuleKind("sameNonEmptyLength") {
    def holds(values: Seq[Any], choices: Seq[String]): Boolean = values match {
      case Seq(a: Seq[_], b: Seq[_]) => a.nonEmpty && a.length == b.length
      case _ => false
    }
  }

  /** No element of any (list) field is 0. */
  case object NoZero extends RuleKind("noZero") {
    def holds(values: Seq[Any], choices: Seq[String]): Boolean =
      values.forall(_.asInstanceOf[Seq[_]].forall(number(_) != 0.0))
  }

  val all: Seq[RuleKind] =
    Seq(Positive, AtLeastZero, OddPositive, OneOf, Spelling, SameNonEmptyLength, NoZero)
}

/** A rule the arguments of an image operation keep, as data: the fields it reads, what it checks,
  * and the message of a value that breaks it: a template whose `{field}` is the field's value as
  * Java prints it and `{field.length}` a list's length. Codegen writes the rules into the Python
  * registry, so each operation's validation and its messages are written once, here.
  */
final case class OpRule(
    kind: RuleKind,
    fields: Seq[String],
    message: String,
    choices: Seq[String] = Nil,
    spelling: Option[Choices] = None
) {

  /** The failure of `op` with field `values`, if they break this rule. */
  def failure(values: Map[String, Any]): Option[String] =
    if (kind.holds(fields.map(values), choices)) None
    else Some(OpRule.render(message, values))
}

object OpRule {
  private val placeholder = """\{(\w+)(\.length)?\}""".r

  /** `template` with its placeholders filled in from `values`. */
  def render(template: String, values: Map[String, Any]): String =
    placeholder.replaceAllIn(
      template,
      m => {
        val value = values(m.group(1))
        val shown = if (m.group(2) == null) value.toString else value.asInstanceOf[Seq[_]].length
        scala.util.matching.Regex.quoteReplacement(shown.toString)
      }
    )

  def positive(fields: String*)(message: String): OpRule =
    OpRule(RuleKind.Positive, fields, message)
  def atLeastZero(fields: String*)(message: String): OpRule =
    OpRule(RuleKind.AtLeastZero, fields, message)

  /** `field` is one of `choices` in any of their spellings. */
  def spelling(field: String, choices: Choices)(message: String): OpRule =
    OpRule(RuleKind.Spelling, Seq(field), message, choices.spellings, Some(choices))

  /** The sizes `height` and `width`, over 0. */
  val positiveSize: OpRule =
    positive("height", "width")("height and width must be positive but were {height} x {width}")
}

/** One argument of an image operation: the name it has in the JSON form, the Scala case class and
  * the fluent methods, what it means, and the OpenCV constants it takes, if any. Its type and
  * default are read off the case class.
  */
final case class Arg(name: String, doc: String, constants: Option[Constants] = None)

object Arg {

  /** The `interpolation` argument of the resizing operations. */
  val interpolation: Arg =
    Arg("interpolation", "the OpenCV INTER_* interpolation", Some(Constants.interpolation))
}

/** One resolved field of an operation: an [[Arg]] with its type and default from the case class. */
final case class OpField(
    name: String,
    doc: String,
    fieldType: FieldType,
    default: Option[Any],
    constants: Option[Constants]
)

/** The description of one image operation, held by the companion object of its case class and
  * listed in [[ImageOp.registry]]: its name, what it does, and its arguments in the order of the
  * case class's constructor. The JSON codec, the list of known operations, the `operations` param
  * doc and the generated Python fluent methods all come from these descriptions; the types and
  * defaults of the fields come from the case class itself, so they are written once.
  *
  * @param name
  *   the name in the JSON form (`"op"`) and of the fluent methods
  * @param doc
  *   what the operation does (the docstring of the fluent methods)
  * @param args
  *   the constructor's parameters, in order
  * @param fluent
  *   whether the Python side gets a public fluent method of this name (otherwise a private one,
  *   `_name`, that a hand-written method uses)
  */
abstract class OpSpec[T <: ImageOp](
    val name: String,
    val doc: String,
    args: Seq[Arg],
    val fluent: Boolean = true
)(implicit tag: ClassTag[T]) {

  /** A valid instance, with distinct values in fields of one type (checked by the tests). */
  def example: T

  /** The rules its arguments keep, besides holding one of their fields' constants (checked after
    * these), in the order they are checked.
    */
  protected def ownRules: Seq[OpRule]

  /** Every rule of the arguments, in the order they are checked. */
  lazy val rules: Seq[OpRule] = ownRules ++ fields.flatMap(f => f.constants.map(_.rule(f.name)))

  /** Fails with the message of the first rule that `op`'s arguments break. */
  def validate(op: ImageOp): Unit = {
    val values = fields.map(f => f.name -> (cls.getMethod(f.name).invoke(op): Any)).toMap
    rules.flatMap(_.failure(values)).headOption.foreach { message =>
      throw new IllegalArgumentException(s"$name: $message")
    }
  }

  val cls: Class[_] = tag.runtimeClass

  private lazy val constructor = {
    val all = cls.getConstructors
    require(all.length == 1, s"image op $name: ${cls.getName} must have one public constructor")
    val c = all.head
    require(
      c.getParameterCount == args.length,
      s"image op $name: ${cls.getName} takes ${c.getParameterCount} arguments but the registry " +
        s"names ${args.length}"
    )
    c
  }

  /** The fields, in constructor order, with their types and the case class's defaults. */
  lazy val fields: Seq[OpField] = args.zipWithIndex.map { case (arg, i) =>
    // A case class keeps the default of its i-th constructor parameter in its companion (this
    // object) as `<init>$default$i` (declared here: static ones are OpSpec's own).
    val default = getClass.getDeclaredMethods
      .find { m =>
        m.getName == s"$$lessinit$$greater$$default$$${i + 1}" && m.getParameterCount == 0 &&
        !java.lang.reflect.Modifier.isStatic(m.getModifiers)
      }
      .map(_.invoke(this))
    OpField(
      arg.name,
      arg.doc,
      FieldType.of(constructor.getParameterTypes()(i)),
      default,
      arg.constants
    )
  }

  /** The fields of the JSON form of `op`, besides `op`, read through the case class's accessors. */
  def encode(op: ImageOp): List[JField] =
    fields.map(f => f.name -> f.fieldType.toJson(cls.getMethod(f.name).invoke(op))).toList

  /** The operation from its JSON object; a missing field takes its default, if it has one. */
  def decode(item: JValue): T = {
    val values = fields.map { f =>
      (item \ f.name, f.default) match {
        case (JNothing | JNull, Some(default)) => default
        case (json, _) => f.fieldType.fromJson(json)
      }
    }
    make(values)
  }

  /** The operation from its field values, in order. */
  def make(values: Seq[Any]): T =
    try constructor.newInstance(values.map(_.asInstanceOf[AnyRef]): _*).asInstanceOf[T]
    catch { case e: java.lang.reflect.InvocationTargetException => throw e.getCause }

  /** `name(field, field=default, ...)`, for docs and messages. */
  def signature: String = fields
    .map(f =>
      f.name + f.default
        .map(d =>
          "=" + (d match {
            case s: Seq[_] => s.mkString("[", ",", "]")
            case other => other.toString
          })
        )
        .getOrElse("")
    )
    .mkString(s"$name(", ", ", ")")
}
